"""``WorkflowState``: a plan's shared working memory in a few calls (the service spec's
helper): keys and values, and the history of actions taken on the plan."""

from __future__ import annotations

from typing import Any

from engramdb.client.client import MemoryClient
from engramdb.core.errors import ConflictError, NotFoundError

#: The state key holding the action history.
ACTIONS_KEY = "_actions"


class WorkflowState:
    """The state of plan ``plan_id`` through ``client``.

    The action history is one state key rewritten on each ``record_action``, only over the
    version it read: of two agents recording at the same moment, one reads again and appends
    to what the other wrote, so no entry is lost.

    Example::

        state = WorkflowState(client, plan_id)
        await state.set("research_data", {"findings": [...]})
        await state.record_action("research.completed")
        count = await state.cleanup()
    """

    def __init__(self, client: MemoryClient, plan_id: str) -> None:
        self.client = client
        self.plan_id = plan_id

    async def set(self, key: str, value: Any) -> None:
        """Set ``key`` to ``value`` (any JSON value but ``None``)."""
        await self.client.set_plan_state(self.plan_id, key, value)

    async def get(self, key: str, default: Any = None) -> Any:
        """The value of ``key``, or ``default`` if it is unset."""
        try:
            return (await self.client.get_plan_state(self.plan_id, key)).value
        except NotFoundError:
            return default

    async def record_action(self, action: str) -> None:
        """Append ``action`` to the plan's action history."""
        while True:
            try:
                read = await self.client.get_plan_state(self.plan_id, ACTIONS_KEY)
            except NotFoundError:
                read = None
            history = read.value if read is not None and isinstance(read.value, list) else []
            try:
                await self.client.set_plan_state(
                    self.plan_id,
                    ACTIONS_KEY,
                    [*history, action],
                    expected_version=None if read is None else read.version,
                    if_absent=read is None,
                )
                return
            except (ConflictError, NotFoundError):
                continue  # another agent wrote (or deleted) the history meanwhile

    async def get_action_history(self) -> list[str]:
        """The actions recorded on the plan, oldest first."""
        history = await self.get(ACTIONS_KEY, [])
        return [str(action) for action in history] if isinstance(history, list) else []

    async def delete(self, key: str) -> bool:
        """Delete ``key``; ``False`` if it was unset."""
        return await self.client.delete_plan_state(self.plan_id, key) > 0

    async def cleanup(self) -> int:
        """Delete all of the plan's state; returns how many keys went."""
        return await self.client.delete_plan_state(self.plan_id)
