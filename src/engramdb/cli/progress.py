"""Progress bars of long commands (import, rebuild, reindex): count, percentage, elapsed
time and time left, on stderr, hidden when the output is JSON."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from engramdb.cli import render


class Bars:
    """One bar per phase of a command, each with a known total."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress
        self._tasks: dict[str, TaskID] = {}

    def begin(self, phase: str, total: int | None, unit: str = "") -> None:
        """Start the bar of ``phase``; the bars of earlier phases are marked done."""
        self.finish()
        self._tasks[phase] = self._progress.add_task(phase, total=total, unit=unit)

    def advance(self, phase: str, amount: int) -> None:
        """``amount`` more of ``phase`` done (a total passed raises the total)."""
        task = self._tasks[phase]
        self._progress.advance(task, amount)
        state = self._progress.tasks[task]
        if state.total is not None and state.completed > state.total:
            self._progress.update(task, total=state.completed)

    def advancer(self, phase: str) -> Callable[[int], None]:
        """``advance`` bound to ``phase``: the ``progress`` callback of one engine call."""
        return lambda amount: self.advance(phase, amount)

    def finish(self) -> None:
        """Mark every bar done (work counted coarsely may stop short of its total)."""
        for task in self._tasks.values():
            state = self._progress.tasks[task]
            self._progress.update(task, completed=state.total or state.completed)


@contextmanager
def bars(*, hidden: bool, label_width: int = 8) -> Iterator[Bars]:
    """Progress bars on stderr for the duration of the block (none if ``hidden``)."""
    with Progress(
        TextColumn(f"{{task.description:<{label_width}}}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[unit]}"),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=render.err,
        disable=hidden,
    ) as progress:
        shown = Bars(progress)
        yield shown
        shown.finish()
