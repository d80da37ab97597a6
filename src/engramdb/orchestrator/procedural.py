"""``ProceduralMemory``: rules and few-shot examples, each with a trigger condition matched
against the prompt.

| operation | here |
|---|---|
| ``memorize`` | stores a rule (``kind="rule"``) or example (``kind="example"``) with a trigger |
| | from ``metadata["trigger"]``: ``always``, ``keywords:a,b`` (any word present), |
| | ``regex:<pattern>``, or free text (matched by meaning); default: free text = the rule |
| ``remember`` | every rule whose trigger fires (score 1.0), then the closest by meaning |
| ``forget`` | ``id``, ``key``, ``matching``, ``oldest``, ``all`` |
| ``summarize`` | the rules, extractive within the token limit |
| ``get_capacity_info`` | rules and their tokens |
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, ClassVar

from engramdb.core.errors import InvalidPatternError
from engramdb.core.intent import MemorizeResult, MemoryItem
from engramdb.core.patterns import compile_pattern, pattern_search
from engramdb.orchestrator.plugin import (
    StoredMemoryType,
    importance,
    record_item,
    require_item,
    require_prompt,
)
from engramdb.providers.projection import ProjectionSpec
from engramdb.storage.records import Record

NAMESPACE = "procedural"


def _trigger(value: Any) -> str:
    return str(value.get("trigger", "")) if isinstance(value, dict) else ""


def rule_key_text(key: str, value: Any, occurred_at: datetime | None) -> str:
    """Full-text key of a rule: its trigger words and its text."""
    text = value.get("text", "") if isinstance(value, dict) else str(value)
    trigger = _trigger(value).split(":", 1)[-1].replace(",", " ")
    return f"{trigger} {text}"


PROCEDURAL_SPEC = ProjectionSpec(
    NAMESPACE, key_text=rule_key_text, vectors=True, embed_text=rule_key_text
)


def check_trigger(trigger: str) -> str:
    """``trigger`` if well formed, else a ``ValidationError``: a ``regex:`` must be one the
    linear-time engine runs (``InvalidPatternError`` otherwise, see ``core.patterns``)."""
    if trigger.startswith("regex:"):
        compile_pattern(trigger[len("regex:") :])
    return trigger


def fires(trigger: str, prompt: str, present: set[str] | None = None) -> bool:
    """Whether an explicit trigger matches ``prompt`` (free-text triggers never fire here:
    they are matched by meaning). ``present`` is the prompt's lowercased word set, when the
    caller has it already."""
    if trigger == "always":
        return True
    if trigger.startswith("keywords:"):
        words = {w.strip().lower() for w in trigger[len("keywords:") :].split(",") if w.strip()}
        if present is None:
            present = set(re.findall(r"\w+", prompt.lower()))
        return bool(words & present) or any(" " in w and w in prompt.lower() for w in words)
    if trigger.startswith("regex:"):
        try:
            return pattern_search(trigger[len("regex:") :], prompt)
        except InvalidPatternError:
            return False  # stored before such patterns were refused: it never fires
    return False


class ProceduralMemory(StoredMemoryType):
    """Procedural memory of one scope (see the module docstring)."""

    name: ClassVar[str] = NAMESPACE
    supported_forget: ClassVar[frozenset[str]] = frozenset(
        {"id", "key", "matching", "oldest", "all"}
    )

    def content_type(self, item: MemoryItem) -> str:
        """Rules and examples are ``reasoning``."""
        return "reasoning"

    async def memorize(self, item: MemoryItem) -> MemorizeResult:
        """Store a rule or example with its trigger."""
        require_item(item)
        trigger = check_trigger(str(item.metadata.get("trigger", item.text)))
        request = self._request(item, key=item.key or item.id, trigger=trigger)
        (entry,) = await self.provider.write_many([request])
        return MemorizeResult(id=entry.key)

    async def remember(
        self,
        prompt: str,
        *,
        limit: int = 10,
        filters: dict[str, Any] | None = None,
        raw: bool = False,
    ) -> list[MemoryItem]:
        """Rules whose trigger fires first (score 1.0), then rules close in meaning;
        redacted unless ``raw``."""
        require_prompt(prompt)
        present = set(re.findall(r"\w+", prompt.lower()))
        fired: list[Record] = [
            r
            for r in await self.records(metadata=dict(filters or {}))
            if fires(_trigger(r.value), prompt, present)
        ]
        fired.sort(key=lambda r: (-importance(r), r.key))
        items = [record_item(r, 1.0, {"trigger": 1.0}) for r in fired[:limit]]
        seen = {r.key for r in fired}
        if len(items) < limit:
            for item in await self._search(prompt, limit, filters):
                if item.id not in seen and not _explicit(item):
                    items.append(item)
        return self.redacted(items[:limit], raw)


def _explicit(item: MemoryItem) -> bool:
    # Rules with an explicit trigger are recalled only when it fires.
    trigger = str(item.metadata.get("trigger", ""))
    return trigger == "always" or trigger.startswith(("keywords:", "regex:"))
