"""A LangGraph agent whose long-term memory is Engram: ``EngramStore`` is the graph's store, so
what the user tells the agent in one conversation is recalled in the next, by hybrid search
over the stored memories; every memory is an Engram record with its events.

    python examples/langgraph_agent.py [DATABASE]   (default: a file in a temporary folder)

Needs ``pip install 'engramdb[langgraph]'``. No LLM is needed: the chat model is LangChain's
``GenericFakeChatModel`` replaying the answers a real model would give; the memories recalled
for its prompt are printed.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.store.base import BaseStore

from engramdb.integrations.langgraph import EngramStore

#: Two conversations (LangGraph threads): the user tells, then asks.
CONVERSATIONS = [
    ("thread-1", "Remember: I just moved to Lisbon. Remember: I am allergic to peanuts."),
    ("thread-2", "Which city do I live in now?"),
]
#: What the model answers, in order (a real model would read the prompt).
ANSWERS = ["Noted: Lisbon, and no peanuts.", "You live in Lisbon."]


def user_of(config: RunnableConfig) -> str:
    return str(config.get("configurable", {}).get("user_id", "anonymous"))


async def remember(
    state: MessagesState, config: RunnableConfig, *, store: BaseStore
) -> dict[str, Any]:
    """Keep what the user asks to remember, one memory per statement."""
    said = str(state["messages"][-1].content)
    for n, part in enumerate(said.split("Remember:")[1:]):
        fact = part.strip().rstrip(".")
        await store.aput(("memories", user_of(config)), f"{len(said)}-{n}", {"text": fact})
        print(f"stored: {fact}")
    return {}


def count_turn(state: MessagesState, config: RunnableConfig, *, store: BaseStore) -> dict[str, Any]:
    """A synchronous node (LangGraph runs it on a worker thread): the blocking store API."""
    namespace = ("stats", user_of(config))
    seen = store.get(namespace, "turns")
    store.put(namespace, "turns", {"count": (seen.value["count"] if seen else 0) + 1})
    return {}


def model_node(model: GenericFakeChatModel) -> Any:
    async def answer(
        state: MessagesState, config: RunnableConfig, *, store: BaseStore
    ) -> dict[str, list[BaseMessage]]:
        question = str(state["messages"][-1].content)
        hits = await store.asearch(("memories", user_of(config)), query=question, limit=2)
        for hit in hits:
            print(f"recalled: {hit.value['text']} (score {hit.score:.2f})")
        known = "\n".join(f"- {hit.value['text']}" for hit in hits) or "- nothing yet"
        prompt = [SystemMessage(f"What you know about the user:\n{known}"), *state["messages"]]
        reply = await model.ainvoke(prompt)
        return {"messages": [reply]}

    return answer


async def run(db: str) -> None:
    model = GenericFakeChatModel(messages=iter(AIMessage(text) for text in ANSWERS))
    graph = StateGraph(MessagesState)
    graph.add_node("remember", remember)
    graph.add_node("count_turn", count_turn)
    graph.add_node("answer", model_node(model))
    graph.add_edge(START, "remember")
    graph.add_edge("remember", "count_turn")
    graph.add_edge("count_turn", "answer")
    graph.add_edge("answer", END)
    async with EngramStore.open(db, tenant="acme", user="alice") as store:
        agent = graph.compile(store=store)
        for thread, said in CONVERSATIONS:
            config: RunnableConfig = {"configurable": {"thread_id": thread, "user_id": "alice"}}
            print(f"user ({thread}): {said}")
            result = await agent.ainvoke({"messages": [HumanMessage(said)]}, config)
            print(f"agent: {result['messages'][-1].content}")
        turns = await store.aget(("stats", "alice"), "turns")
        print(f"turns counted: {turns.value['count'] if turns else 0}")
        print(f"namespaces: {await store.alist_namespaces()}")
        events = await store.engine.events.count()
        print(f"events in the log: {events}")


def main() -> None:
    if len(sys.argv) > 1:
        asyncio.run(run(sys.argv[1]))
        return
    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(run(str(Path(folder) / "memory.db")))


if __name__ == "__main__":
    main()
