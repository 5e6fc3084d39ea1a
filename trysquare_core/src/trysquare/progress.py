"""What ``validate`` shows while it works: a bar on a terminal, plain lines otherwise."""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

from trysquare._shown import shown

if TYPE_CHECKING:
    from trysquare.execute import TaskResult

__all__ = ["Progress"]


class Progress:
    """A bar on a terminal, plain lines otherwise; a failure stays on screen."""

    def __init__(self, total: int, enabled: bool | None, stream: TextIO) -> None:
        self.total = total
        self.done = 0
        self.stream = stream
        self.bar = None
        if enabled is None:
            enabled = stream.isatty()
        self.plain = not enabled
        if enabled and total:
            from rich.progress import Progress as RichProgress

            self.bar = RichProgress(transient=True)
            self.bar.start()
            self.task_id = self.bar.add_task("validating", total=total)

    def advance(self, result: TaskResult) -> None:
        """Count one finished task and say how it ended."""
        self.done += 1
        run = result.task.run
        state = result.outcome.state
        detail = f": {result.outcome.error}" if state == "invalid" else ""
        # Run ids, cells and errors come from run folders: escaped, one item one line.
        line = shown(
            f"[{self.done}/{self.total}] {run.id} ({run.cell} #{run.repetition}) "
            f"{result.task.validation.name}: {state}{detail}"
        )
        if self.bar is not None:
            self.bar.advance(self.task_id)
            if state == "invalid":  # a failure stays on screen above the bar
                self.bar.console.print(line, markup=False, highlight=False)
        elif self.plain:
            print(line, file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
