"""``LLMExtractor``: conversation turns in, an ``Extraction`` (facts, events, entities,
relations, inferences, each citing its turns) out, through ``ChatClient.complete_json``.

It only asks and validates: matching against what is stored, superseding and storing belong
to the formation layer, which also falls back to its rules when this raises. Every failure is
typed (``LLMUnavailableError``, ``LLMOutputError``, ``LLMEmptyAnswerError``); an answer that
validates but extracts nothing is an empty ``Extraction``, for the caller to report as such.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from engramdb.llm.client import ChatClient
from engramdb.llm.extraction_schema import Extraction, Turn

__all__ = ["SYSTEM_PROMPT", "LLMExtractor"]

_log = logging.getLogger(__name__)

SYSTEM_PROMPT = """\
You read a conversation between a user and an assistant and extract what should be remembered
about the user, as JSON.

- facts: what the user states about themselves or people close to them (where they live, where
  they work, their name, age, family, pets, likes and dislikes, activities). Name the
  attribute with a short word: city, employer, occupation, name, age, pet (or dog, cat, …),
  sister, husband, …, likes, dislikes. Set "ended" when the user says a fact is no longer true
  ("I left Acme": employer Acme, ended).
- events: things that happened or are planned, described in one sentence about the user ("The
  user flies to Paris for a conference"), with the time as said ("when") and, if the turn
  gives enough to know it, the date ("on", YYYY-MM-DD) resolved against the turn's own date.
- entities and relations: named people, pets, places and organisations, and how they relate.
- inferences: goals, beliefs, preferences or intentions the user did not state but that the
  conversation suggests, each with a confidence below 1.

Every item lists in "turn_ids" the ids of the turns it comes from, exactly as shown in square
brackets. Extract only what the turns say or clearly imply; leave a list empty when there is
nothing for it."""


def render(turns: Sequence[Turn]) -> str:
    """The turns as the model sees them: ``[id] (time) role: content``, one per line."""
    lines = []
    for turn in turns:
        when = f" ({turn.timestamp.isoformat()})" if turn.timestamp is not None else ""
        lines.append(f"[{turn.id}]{when} {turn.role}: {turn.content}")
    return "\n".join(lines)


class LLMExtractor:
    """Extracts memories from conversation turns with a chat model.

    Args:
        client: the chat model; its ``LLMConfig`` sets retries and ``json_attempts``.
    """

    def __init__(self, client: ChatClient) -> None:
        self.client = client

    async def extract(self, turns: Sequence[Turn]) -> Extraction:
        """What the model extracts from ``turns``; items citing turns it was not shown are
        dropped (and logged).

        Raises:
            ValueError: no turns, or two turns share an id.
            LLMError: the model was unavailable or gave no valid extraction (a subclass says
                which).
        """
        ids = [turn.id for turn in turns]
        if not ids:
            raise ValueError("there are no turns to extract from")
        if len(set(ids)) != len(ids):
            raise ValueError("turn ids must be unique")
        messages = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": render(turns)},
        ]
        answer = await self.client.complete_json(messages, schema=Extraction)
        kept, dropped = answer.citing(ids)
        if dropped:
            _log.warning("dropped %d extracted items citing turns that were not shown", dropped)
        return kept
