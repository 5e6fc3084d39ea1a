"""The script mode: run an executable on the archived context, read its JSON.

The run becomes invalid — cause recorded, stderr kept — when the script exits
non-zero, prints unreadable JSON or nothing, exceeds its timeout, or omits a
declared metric. Its working directory is an empty scratch folder of its own
(:func:`trysquare.api.scratch_folder`), never the measured clone; where the kernel allows it (Landlock), that folder (also its
``TMPDIR``) and its archive folder are the only places it can write.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import attrs
from trysquare.api import (
    DEFAULT_OUTPUT_CAP,
    Outcome,
    TableSource,
    Validation,
    ValidationTask,
    check_timeout,
    child_environment,
    keep_output,
    parse_validator_output,
    record,
    run_process,
    run_warm_if_served,
    scratch_folder,
    sha256,
)

if TYPE_CHECKING:  # the process runner is loaded when a script first runs, not to report
    from trysquare.api import ProcessResult

DEFAULT_TIMEOUT = 300.0


@record(kw_only=True)
class _ScriptTable:
    mode: str
    command: str
    metrics: tuple[str, ...]
    name: str = ""
    timeout: float = DEFAULT_TIMEOUT
    pass_env: tuple[str, ...] = ()
    warm: bool = True


@record(kw_only=True)
class ScriptValidation(Validation):
    """A ``[[validation]] mode = "script"`` table."""

    command: str
    executable: Path
    timeout: float = DEFAULT_TIMEOUT
    # Secret-looking variables this script may see all the same (checked at load:
    # never a judge provider's key).
    pass_env: tuple[str, ...] = ()
    # ``warm = false``: every run starts the script afresh, even one the warm path could serve.
    # Not in the digest: warm and cold record the same results.
    warm: bool = True

    # The script and the suite it may run start confined (writable: its scratch, its archive).
    confines_what_it_runs: ClassVar[bool] = True
    # It starts its executable (or its warm server's child) at once.
    starts_a_child: ClassVar[bool] = True
    # Its outcome is the script's alone: the result it replaces is never read for it.
    reads_previous: ClassVar[bool] = False
    # A script in any language gets the session's reading as JSON (``session_facts``).
    wants_session_facts: ClassVar[bool] = True

    def digest(self) -> str:
        # The executable's bytes identify it: an edited script makes results stale.
        hasher = sha256()
        try:
            hasher.update(self.executable.read_bytes())
        except OSError:
            hasher.update(b"<unreadable>")
        # pass_env only once set, so results recorded before it existed stay current.
        table: tuple[object, ...] = (sorted(self.metrics), self.timeout)
        if self.pass_env:
            table += (sorted(self.pass_env),)
        hasher.update(repr(table).encode())
        return "sha256:" + hasher.hexdigest()

    def evaluate(self, task: ValidationTask) -> Outcome:
        from trysquare.api import (
            RunError,
            write_session_facts,  # lazy: loading the mode stays cheap
        )

        try:
            write_session_facts(task.run, task.context)
        except RunError as error:
            return Outcome.invalid(f"script {self.command}: {error.message}")
        with scratch_folder("trysquare-script-") as workdir:
            argv = [str(self.executable), str(task.context_path)]
            base_env = _environment(self.pass_env, task)
            env = {**base_env, **task.environment, "TMPDIR": workdir}
            # Its scratch folder and its archive are all it may write (where
            # the kernel allows it): not the clone, the run or the etalon cache.
            writable: list[str | Path] = [workdir, task.archive]
            done = self._run_warm(argv, workdir, base_env, env, writable)
            if done is None:
                try:
                    done = run_process(
                        argv, cwd=workdir, timeout=self.timeout, env=env, writable=writable
                    )
                except OSError as error:
                    return Outcome.invalid(
                        f"script {self.command} could not be started: {error.strerror}"
                    )
        if done.timed_out:
            return Outcome.invalid(
                f"script {self.command} exceeded its timeout of {self.timeout:g} s "
                "(its process group was killed)",
                stderr=done.stderr,
            )
        if done.returncode != 0:
            said = _last_words(done.stderr)
            return Outcome.invalid(
                f"script {self.command} {_exit_description(done.returncode)}{said}",
                stderr=done.stderr,
            )
        if done.truncated:
            return Outcome.invalid(
                f"script {self.command} printed more than the output cap "
                f"({DEFAULT_OUTPUT_CAP >> 20} MiB on stdout or stderr)",
                stderr=done.stderr,
            )
        outcome = parse_validator_output(
            done.stdout, declared=self.metrics, what=f"script {self.command}"
        )
        if outcome.state == "invalid" and done.stdout.strip():
            keep_output(task, done.stdout)  # the error quotes its first bytes; the archive has all
        return attrs.evolve(outcome, stderr=done.stderr)

    def _run_warm(
        self,
        argv: list[str],
        workdir: str,
        base_env: Mapping[str, str],
        env: Mapping[str, str],
        writable: list[str | Path],
    ) -> ProcessResult | None:
        """The script run by its warm server (``docs/warm.md``), or ``None`` for the cold path."""
        if not self.warm:
            return None
        return run_warm_if_served(
            self.executable,
            argv,
            cwd=workdir,
            timeout=self.timeout,
            base_env=base_env,
            env=env,
            writable=writable,
        )


def _last_words(stderr: bytes | None, limit: int = 300) -> str:
    """``": "`` and the last line the script printed on stderr (why it failed, as it said
    it: ``did not return the declared metric 'added_tset'``, a traceback's last line),
    so every output names the cause, not only the exit code; empty when it said nothing."""
    text = (stderr or b"")[-8192:].decode("utf-8", "replace")
    lines = [line.strip() for line in text.split("\n")]
    last = next((line for line in reversed(lines) if line), "")
    if not last:
        return ""
    return ": " + (last if len(last) <= limit else last[: limit - 1] + "\u2026")


def _exit_description(code: int | None) -> str:
    if code is not None and code < 0:
        return f"was killed by signal {-code}"
    return f"exited with code {code}"


def _environment(pass_env: Sequence[str], task: ValidationTask) -> Mapping[str, str]:
    # The script gets trysquare's environment minus every judge key and every
    # secret-looking variable, except those passed by name: its own pass_env, and
    # the suite's ([task] pass_env, which run.tests() inside it hands on).
    env = child_environment(passed=[*pass_env, *task.suite_pass_env], protected=task.protected_env)
    # `#!/usr/bin/env python3` must find the interpreter trysquare runs in (and so
    # trysquare.assay), even when its virtual environment is not activated.
    interpreter_dir = os.path.dirname(sys.executable)
    env["PATH"] = os.pathsep.join(filter(None, [interpreter_dir, env.get("PATH")]))
    return env


class ScriptMode:
    name = "script"

    def load(self, table: Mapping[str, Any], source: TableSource) -> ScriptValidation:
        raw = source.structure(table, _ScriptTable)
        check_timeout(source, raw.timeout)
        executable = source.resolve(raw.command)
        if not executable.is_file():
            raise source.refuse(
                "command", f"'{raw.command}' does not exist (looked for {executable})"
            )
        if not os.access(executable, os.X_OK):
            raise source.refuse(
                "command", f"'{raw.command}' is not executable; run: chmod +x {raw.command}"
            )
        return ScriptValidation(
            mode=raw.mode,
            name=raw.name,
            metrics=raw.metrics,
            command=raw.command,
            executable=executable,
            timeout=raw.timeout,
            pass_env=raw.pass_env,
            warm=raw.warm,
        )
