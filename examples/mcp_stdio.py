"""Engram as an MCP server, spoken to as an agent framework would: this script starts
``engram mcp`` over stdio (a database in a temporary folder), lists its tools, stores what a
user said, and recalls it through the tools, a resource and the prompt.

    python examples/mcp_stdio.py

Needs the ``mcp`` extra: ``pip install 'engramdb[mcp]'``. A desktop agent starts the same
command from its configuration (see the README).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from mcp import Client, StdioServerParameters
from mcp.types import TextContent, TextResourceContents


def engram_command() -> tuple[str, list[str]]:
    """The ``engram`` command beside this Python, else on the PATH, else ``python -m``."""
    beside = Path(sys.executable).parent / "engram"
    found = str(beside) if beside.exists() else shutil.which("engram")
    return (found, []) if found else (sys.executable, ["-m", "engramdb.cli"])


async def main(folder: Path) -> None:
    command, prefix = engram_command()
    server = StdioServerParameters(
        command=command,
        args=[*prefix, "mcp", "--tenant", "acme", "--user", "alice"],
        env={**os.environ, "ENGRAM_DB": str(folder / "engram.db"), "HF_HUB_OFFLINE": "1"},
    )
    async with Client(server) as engram:
        tools = [tool.name for tool in (await engram.list_tools()).tools]
        print("tools:", ", ".join(tools))

        await engram.call_tool(
            "memorize", {"type": "semantic", "text": "Alice is allergic to peanuts"}
        )
        await engram.call_tool(
            "memorize",
            {"type": "episodic", "text": "Alice cooked a Thai curry", "role": "user"},
        )
        found = await engram.call_tool("remember", {"type": "semantic", "query": "food allergies"})
        print("remembered:", [item["text"] for item in found.structured_content["items"]])

        mistake = await engram.call_tool("forget", {"type": "episodic", "instruction": "soon"})
        text = "".join(c.text for c in mistake.content if isinstance(c, TextContent))
        print("a bad call answers:", text.splitlines()[0][:80])

        recent = (await engram.read_resource("engram://episodes/recent")).contents[0]
        assert isinstance(recent, TextResourceContents)
        print("recent episode:", json.loads(recent.text)["items"][0]["text"])

        prompt = await engram.get_prompt(
            "recall_then_answer", {"question": "What should I cook for Alice?"}
        )
        message = prompt.messages[0].content
        assert isinstance(message, TextContent)
        print("the prompt recalls:", "allergic to peanuts" in message.text)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(main(Path(folder)))
