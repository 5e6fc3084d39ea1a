"""The script mode: run an executable on the archived context, read its JSON.

The run becomes invalid — cause recorded, stderr kept — when the script exits
non-zero, prints unreadable JSON or nothing, exceeds its timeout, or omits a
declared metric. Its working directory is a fresh temporary folder, never the
measured clone; where the kernel allows it (Landlock), that folder (also its
``TMPDIR``) and its archive folder are the only places it can write.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from trysquare._process import DEFAULT_CAP, run_process
from trysquare.modes import Job, Outcome, TableSource, Validation
from trysquare.outputs import parse_validator_output
from trysquare.sandbox import Sandbox

DEFAULT_TIMEOUT = 300.0


@attrs.frozen(kw_only=True)
class _ScriptTable:
    mode: str
    command: str
    metrics: tuple[str, ...]
    name: str = ""
    timeout: float = DEFAULT_TIMEOUT


@attrs.frozen(kw_only=True)
class ScriptValidation(Validation):
    """A ``[[validation]] mode = "script"`` table."""

    command: str
    executable: Path
    timeout: float = DEFAULT_TIMEOUT

    def digest(self) -> str:
        # The executable's bytes identify it: an edited script makes results stale.
        hasher = hashlib.sha256()
        try:
            hasher.update(self.executable.read_bytes())
        except OSError:
            hasher.update(b"<unreadable>")
        hasher.update(repr((sorted(self.metrics), self.timeout)).encode())
        return "sha256:" + hasher.hexdigest()

    def evaluate(self, job: Job) -> Outcome:
        with tempfile.TemporaryDirectory(prefix="trysquare-script-") as workdir:
            try:
                done = run_process(
                    [str(self.executable), str(job.context_path)],
                    cwd=workdir,
                    timeout=self.timeout,
                    env={**_environment(), "TMPDIR": workdir},
                    # Its scratch folder and its archive are all it may write (where
                    # the kernel allows it): not the clone, the run or the etalon cache.
                    sandbox=Sandbox([workdir, job.archive]),
                )
            except OSError as error:
                return Outcome.invalid(f"script {self.command} could not be started: {error.strerror}")
        if done.timed_out:
            return Outcome.invalid(
                f"script {self.command} exceeded its timeout of {self.timeout:g} s "
                "(its process group was killed)",
                stderr=done.stderr,
            )
        if done.returncode != 0:
            return Outcome.invalid(
                f"script {self.command} {_exit_description(done.returncode)}", stderr=done.stderr
            )
        if done.truncated:
            return Outcome.invalid(
                f"script {self.command} printed more than the output cap "
                f"({DEFAULT_CAP >> 20} MiB on stdout or stderr)",
                stderr=done.stderr,
            )
        outcome = parse_validator_output(done.stdout, declared=self.metrics, what=f"script {self.command}")
        return attrs.evolve(outcome, stderr=done.stderr)


def _exit_description(code: int | None) -> str:
    if code is not None and code < 0:
        return f"was killed by signal {-code}"
    return f"exited with code {code}"


def _environment() -> Mapping[str, str]:
    env = dict(os.environ)
    # `#!/usr/bin/env python3` must find the interpreter trysquare runs in (and so
    # trysquare.assay), even when its virtual environment is not activated.
    interpreter_dir = os.path.dirname(sys.executable)
    env["PATH"] = os.pathsep.join(filter(None, [interpreter_dir, env.get("PATH")]))
    return env


class ScriptMode:
    name = "script"

    def load(self, table: Mapping[str, Any], source: TableSource) -> ScriptValidation:
        raw = source.structure(table, _ScriptTable)
        if raw.timeout <= 0:
            raise source.refuse("timeout", "must be a positive number of seconds")
        executable = source.resolve(raw.command)
        if not executable.is_file():
            raise source.refuse("command", f"'{raw.command}' does not exist (looked for {executable})")
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
        )
