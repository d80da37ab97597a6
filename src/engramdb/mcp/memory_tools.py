"""The intent tools: memorize, remember, forget, summarize and capacity (one tool each, the
memory type as an argument), assemble (every type at once, within a token budget) and
memory_types (the registry: every type the server knows, built-in or not).

One tool per operation keeps the list short for a model to choose from; the ``type``
argument's description says which built-in memory holds what, and ``memory_types`` lists the
others (memory-file categories, types of installed packages), which every tool takes too.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from pydantic import AwareDatetime, Field

from engramdb.core.intent import MemoryItem
from engramdb.core.validation import CONTENT_TYPE_PATTERN
from engramdb.engine import ScopedMemory
from engramdb.mcp.binding import bound
from engramdb.mcp.shapes import item_json, redacted
from engramdb.mcp.tooling import DESTRUCTIVE, READ_ONLY, WRITES, engram_tool
from engramdb.orchestrator.assemble import AssembledContext
from engramdb.orchestrator.budget import Budget
from engramdb.orchestrator.plugin import MemoryPlugin

TYPE_HELP = (
    "Which memory: 'semantic' = lasting facts and knowledge about the user or the world "
    "(preferences, where they live; one current version per key); 'episodic' = things that "
    "happened, with when (events, past conversations); 'procedural' = rules and how-tos the "
    "assistant should follow, each with a trigger; 'conversation' = the turns of the current "
    "conversation; 'working' = short-lived notes for the task at hand. Other types this "
    "server has (such as 'profile' of the memory files, or types of installed packages) are "
    "listed by the memory_types tool and are taken here too."
)
TypeArg = Annotated[
    str,
    Field(min_length=1, max_length=64, pattern=CONTENT_TYPE_PATTERN, description=TYPE_HELP),
]
QueryArg = Annotated[
    str, Field(min_length=1, max_length=10_000, description="What to look for, in plain words.")
]
LimitArg = Annotated[int, Field(ge=1, le=100, description="At most this many memories.")]
TokenLimit = Annotated[int, Field(ge=1, le=100_000, description="At most this many tokens.")]


#: How long each memory type may take to answer ``assemble``. A model calling a tool waits
#: seconds for its answer anyway, so a memory missed for want of a few hundred milliseconds
#: costs more here than within a turn's own assembly (whose default is 500 ms); still bounded.
TOOL_TIME_LIMIT_MS = 5000.0


async def assemble_for_model(
    memory: ScopedMemory, query: str, token_limit: int
) -> AssembledContext:
    """``memory.assemble`` with the time a tool call can afford."""
    budget = Budget(token_limit=token_limit, time_limit_ms=TOOL_TIME_LIMIT_MS)
    return await memory.assemble(query, budget=budget)


def memory_type(memory: ScopedMemory, name: str) -> MemoryPlugin:
    """The registered memory type ``name`` of ``memory``.

    Raises:
        NotFoundError: no such type, or this server does not offer it.
    """
    return memory.memory_type(name)


def register(server: MCPServer) -> None:
    """Add the intent tools to ``server``."""

    @engram_tool(server, WRITES)
    async def memorize(
        type: TypeArg,
        text: Annotated[
            str, Field(min_length=1, max_length=100_000, description="The memory, in words.")
        ],
        key: Annotated[
            str | None,
            Field(
                description="A stable name, e.g. 'user.city'. Semantic: a new text under the "
                "same key replaces the old as its next version. Procedural: the rule's id."
            ),
        ] = None,
        role: Annotated[
            str | None,
            Field(description="Who said it, for a conversation turn or episode: user, assistant."),
        ] = None,
        occurred_at: Annotated[
            AwareDatetime | None,
            Field(description="When it happened (ISO 8601 with time zone); default: now."),
        ] = None,
        importance: Annotated[
            float, Field(ge=0.0, le=1.0, description="0 = trivial, 1 = crucial.")
        ] = 0.5,
        tags: Annotated[list[str] | None, Field(description="Labels to filter by later.")] = None,
        trigger: Annotated[
            str | None,
            Field(
                description="Procedural only: when the rule applies: 'always', "
                "'keywords:a,b' (any of the words in the prompt), 'regex:<pattern>', or a "
                "description matched by meaning (default: the rule's text)."
            ),
        ] = None,
        public: Annotated[
            bool,
            Field(description="Semantic only: share the fact with everyone of the tenant."),
        ] = False,
        metadata: Annotated[
            dict[str, Any] | None,
            Field(description="Your own fields, returned unchanged with the memory."),
        ] = None,
    ) -> dict[str, Any]:
        """Store something worth remembering beyond this conversation: a fact the user told
        you, an event, a rule to follow. Pick the memory type by what the text is (see
        `type`). Answers the stored id and whether it was created or updated."""
        memory = bound().writer()
        meta = dict(metadata or {})
        if trigger is not None:
            meta["trigger"] = trigger
        item = MemoryItem(
            text=text,
            key=key,
            role=role,
            occurred_at=occurred_at,
            importance=importance,
            tags=tags or [],
            metadata=meta,
        )
        if type == "semantic":
            result = await memory.semantic.memorize(item, public=public)
        else:
            result = await memory_type(memory, type).memorize(item)
        return result.model_dump(mode="json")

    @engram_tool(server, READ_ONLY)
    async def remember(type: TypeArg, query: QueryArg, limit: LimitArg = 10) -> dict[str, Any]:
        """Search one memory type for what is relevant to `query`, best match first, each
        with a score. To gather context from every memory type at once, use `assemble`
        instead."""
        memory = bound().memory()
        found = await memory_type(memory, type).remember(query, limit=limit)
        return redacted(memory, {"items": [item_json(i) for i in found]})

    @engram_tool(server, DESTRUCTIVE)
    async def forget(
        type: TypeArg,
        instruction: Annotated[
            str,
            Field(
                min_length=1,
                max_length=10_000,
                description="What to forget, one of: 'id:<id>', 'key:<key>', 'oldest [N]', "
                "'least important [N]', 'before <ISO date>', 'before turn <N>', "
                "'older than <N> hours|days|weeks', 'matching \"<text>\"', "
                "'fade \"<text>\" [by <0..1>]' (lower importance), 'all'.",
            ),
        ],
        mode: Annotated[
            Literal["soft", "hard"],
            Field(description="'soft' hides and can be restored; 'hard' deletes for good."),
        ] = "soft",
    ) -> dict[str, Any]:
        """Forget memories of one type when the user asks you to, or when they are wrong or
        out of date. Answers the ids forgotten (or faded)."""
        memory = bound().writer()
        result = await memory_type(memory, type).forget(instruction, mode=mode)
        return result.model_dump(mode="json")

    @engram_tool(server, READ_ONLY)
    async def summarize(
        type: TypeArg,
        scope: Annotated[
            str,
            Field(
                description="Which memories: 'all', 'recent', 'important', 'by_tag:<tag>', "
                "'since <ISO date>', 'between <ISO date> and <ISO date>'."
            ),
        ] = "all",
        token_limit: TokenLimit = 500,
    ) -> dict[str, Any]:
        """A short summary of one memory type (for an overview, not a search), never longer
        than `token_limit`, with the ids it drew on."""
        memory = bound().memory()
        result = await memory_type(memory, type).summarize(scope=scope, token_limit=token_limit)
        return redacted(memory, result.model_dump(mode="json"))

    @engram_tool(server, READ_ONLY)
    async def assemble(query: QueryArg, token_limit: TokenLimit = 2000) -> dict[str, Any]:
        """Recall everything relevant to `query` from every memory type at once — rules that
        apply, facts, past episodes, the recent conversation, working notes — as one context
        text within `token_limit`, sensitive data redacted. Call this before answering a
        question that may depend on what you know about the user."""
        context = await assemble_for_model(bound().memory(), query, token_limit)
        answer: dict[str, Any] = {
            "text": context.text,
            "tokens": context.tokens,
            "items": [
                {"type": c.memory_type, "id": c.item.id, "score": c.item.score}
                for c in context.items
            ],
        }
        operations = context.trace.operations if context.trace is not None else []
        missed = sorted({op.memory_type for op in operations if op.status != "ok"})
        if missed:  # said, so that the model does not take a gap for "nothing known"
            answer["incomplete"] = missed
        return answer

    @engram_tool(server, READ_ONLY)
    async def memory_types() -> dict[str, Any]:
        """List the memory types this server has: the built-in ones, the categories of the
        memory files and types installed by packages, each with what it holds and whether it
        can be used here (`offered`). Every tool's `type` argument takes these names."""
        memory = bound().memory()
        return {
            "types": [
                {
                    "name": kind.name,
                    "description": kind.description,
                    "heading": kind.title,
                    "offered": memory.offered(kind.name) is not None,
                }
                for kind in memory.engine.memory_types
            ]
        }

    @engram_tool(server, READ_ONLY)
    async def capacity(type: TypeArg) -> dict[str, Any]:
        """How full one memory type is: items and tokens stored against its limits, and
        what it evicts first when full."""
        info = await memory_type(bound().memory(), type).get_capacity_info()
        return info.model_dump(mode="json")


__all__ = ["TypeArg", "memory_type", "register"]
