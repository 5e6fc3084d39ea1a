"""What ``validate`` shows while it works: a bar on a terminal, plain lines otherwise."""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

from trysquare._shown import shown

if TYPE_CHECKING:
    from trysquare.execute import TaskResult

__all__ = ["Progress"]


class Progress:
    """A bar on a terminal, plain lines otherwise; a failure stays on screen.

    ``final``: whether ``total`` is the whole count; if not, it is how many tasks are known
    so far (a large matrix is still planned while its first tasks end), shown as
    ``[n/total+]`` and raised by :meth:`known` until :meth:`settle` gives the whole count.
    """

    def __init__(
        self,
        total: int,
        enabled: bool | None,
        stream: TextIO,
        *,
        quiet: bool = False,
        final: bool = True,
    ) -> None:
        self.total = total
        self.final = final
        self.quiet = quiet
        self.done = 0
        self.stream = stream
        self.bar = None
        enabled = self.bar_wanted(enabled, stream, quiet=quiet)
        self.plain = not enabled
        if enabled and (total or not final):
            from rich.progress import Progress as RichProgress

            self.bar = RichProgress(transient=True)
            self.bar.start()
            self.task_id = self.bar.add_task("validating", total=total)

    @staticmethod
    def bar_wanted(enabled: bool | None, stream: TextIO, *, quiet: bool = False) -> bool:
        """Whether a bar is shown (``enabled`` None: on a terminal, unless quiet)."""
        return stream.isatty() and not quiet if enabled is None else enabled

    @classmethod
    def says_every_line(cls, enabled: bool | None, stream: TextIO, *, quiet: bool = False) -> bool:
        """Whether every finished task's line is shown; otherwise only an invalid one's is (a
        bar or ``-q``), and any other is only counted."""
        return not cls.bar_wanted(enabled, stream, quiet=quiet) and not quiet

    def known(self, total: int) -> None:
        """``total`` tasks are known so far (the whole count is not yet)."""
        self.total = max(total, self.total)
        if self.bar is not None:
            self.bar.update(self.task_id, total=self.total)

    def settle(self, total: int) -> None:
        """The whole count is known: ``total`` tasks."""
        self.final = True
        self.known(total)

    def advance(self, result: TaskResult) -> None:
        """Count one finished task and say how it ended."""
        self.say(*self.describe(result))

    @staticmethod
    def describe(result: TaskResult) -> tuple[str, str]:
        """How a finished task ended: its state, and its line without the count (a few
        strings: what is kept of a task whose line waits for the total)."""
        run = result.task.run
        state = result.outcome.state
        detail = f": {result.outcome.error}" if state == "invalid" else ""
        unjudged = [m for m, v in result.outcome.metrics.items() if v is None]
        if state != "invalid" and unjudged:
            # Unjudged is not valid: said on the line, with the first reason's first line.
            reasons = result.outcome.reasons
            said = "; ".join(
                f"{m} ({_first_line(reasons.get(m) or 'no reason given')})" for m in unjudged
            )
            detail = f", {len(unjudged)} unjudged: {said}"
        if result.outcome.kept_after is not None:
            detail += f" ({result.outcome.kept_after})"
        # Run ids, cells and errors come from run folders: escaped, one item one line.
        line = shown(
            f"{run.id} ({run.cell} #{run.repetition}) {result.task.validation.name}: {state}{detail}"
        )
        if state == "invalid":  # its error says what; its stderr's last lines say why
            from trysquare.failures import invalid_lines

            line = "\n".join(
                [line, *invalid_lines(run.dir, result.task.validation.name, result.document)]
            )
        return state, line

    def say(self, state: str, described: str) -> None:
        """Count one finished task, described by :meth:`describe`."""
        self.done += 1
        line = f"[{self.done}/{self.total}{'' if self.final else '+'}] {described}"
        if self.bar is not None:
            self.bar.advance(self.task_id)
            if state == "invalid":  # a failure stays on screen above the bar
                self.bar.console.print(line, markup=False, highlight=False)
        elif self.plain and (state == "invalid" or not self.quiet):
            print(line, file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def _first_line(text: str, limit: int = 100) -> str:
    """A reason's first line, cut at ``limit`` characters (the whole one is in the report)."""
    lines = text.strip().splitlines() or [""]
    line = lines[0]
    more = len(lines) > 1 or len(line) > limit
    return line[:limit] + ("…" if more else "")
