"""Per-stage progress of an export on stderr: a rich display, plain lines, or nothing."""

from __future__ import annotations

import sys
from typing import Any


class Reporter:
    """Silent reporter; the base the visible ones extend."""

    def start(self, stage: str, detail: str = "") -> None: ...

    def update(self, done: int, total: int) -> None: ...

    def finish(self, stage: str, summary: str) -> None: ...

    def skip(self, stage: str, why: str) -> None: ...

    def close(self) -> None: ...


class PlainReporter(Reporter):
    """One line per stage event on stderr (no rich installed, or not wanted)."""

    def start(self, stage: str, detail: str = "") -> None:
        print(f"export: {stage}: {detail or 'running'}", file=sys.stderr, flush=True)

    def finish(self, stage: str, summary: str) -> None:
        print(f"export: {stage}: done ({summary})", file=sys.stderr, flush=True)

    def skip(self, stage: str, why: str) -> None:
        print(f"export: {stage}: skipped ({why})", file=sys.stderr, flush=True)


class RichReporter(Reporter):
    """A rich progress display on stderr with one line per stage."""

    def __init__(self) -> None:
        from rich import progress as rp
        from rich.console import Console

        self._bar = rp.Progress(
            _Mark(finished_text="[green]✓"),
            rp.TextColumn("{task.description}"),
            rp.BarColumn(),
            rp.TaskProgressColumn(),
            rp.TimeElapsedColumn(),
            console=Console(stderr=True),
        )
        self._tasks: dict[str, Any] = {}
        self._current: Any = None
        self._bar.start()

    def start(self, stage: str, detail: str = "") -> None:
        text = f"{stage}: {detail}" if detail else stage
        if stage not in self._tasks:  # a stage appears when it starts: the display is a log
            self._tasks[stage] = self._bar.add_task(text, total=None)
        self._current = task = self._tasks[stage]
        self._bar.update(task, description=text, total=None, completed=0)

    def update(self, done: int, total: int) -> None:
        if self._current is not None:
            self._bar.update(self._current, completed=done, total=max(total, 1))

    def finish(self, stage: str, summary: str) -> None:
        task = self._tasks[stage]
        self._bar.update(task, description=f"{stage}: {summary}", total=1, completed=1)
        self._bar.stop_task(task)
        self._current = None

    def skip(self, stage: str, why: str) -> None:
        # Kept in the log as a finished line, so the display still reads in stage order.
        task = self._bar.add_task(f"[dim]{stage}: skipped ({why})", total=1, mark="[dim]-")
        self._bar.update(task, completed=1)
        self._bar.stop_task(task)
        self._tasks[stage] = task

    def close(self) -> None:
        self._bar.stop()


def _Mark(**kw: Any) -> Any:  # noqa: N802 - a column class made on first use (rich is optional)
    """A spinner column that shows a task's own `mark` field when it has one (skipped stages)."""
    from rich.progress import SpinnerColumn

    class Mark(SpinnerColumn):
        def render(self, task: Any) -> Any:
            from rich.text import Text

            mark = task.fields.get("mark")
            return Text.from_markup(mark) if mark else super().render(task)

    return Mark(**kw)


def make_reporter(enabled: bool = True) -> Reporter:
    """A rich display when rich is installed, else plain lines; silent when not enabled."""
    if not enabled:
        return Reporter()
    try:
        return RichReporter()
    except ImportError:
        return PlainReporter()
