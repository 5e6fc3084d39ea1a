"""``scenario.toml``: the experiment's single source of truth, loaded strictly.

Everything is refused at load, before anything runs, with one plain sentence
naming the file and the key: an unknown key (with a close match), a metric
declared twice, an unknown mode, a command word only a shell understands...
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from trysquare import _convert
from trysquare._jail_limits import DEFAULT_FILE_SIZE_MIB, DEFAULT_MEMORY_MIB, DEFAULT_PROCESSES
from trysquare._record import record
from trysquare.errors import ScenarioError
from trysquare.modes import PIECES, Mode, TableSource, Validation

if TYPE_CHECKING:
    from trysquare._words import ShellWordError, split_command
    from trysquare.jail import JailPolicy

__all__ = ["Scenario", "ShellWordError", "Task", "Verdict", "load_scenario", "split_command"]


def __getattr__(name: str) -> Any:
    # The shell-word rules are imported when first asked for (trysquare._words): a scenario
    # with no test_command and no prepare step splits no command.
    if name in ("ShellWordError", "split_command"):
        from trysquare import _words

        return getattr(_words, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Where a mode lives when it is not installed, for the refusal's hint.
KNOWN_MODE_DISTRIBUTIONS = {
    "script": "trysquare-script",
    "judge": "trysquare-judge",
    "form": "trysquare-form",
    "hidden-tests": "trysquare-hidden-tests",
}
# A validator's name becomes file names inside each run folder (validation/<name>.json):
# a plain name, never a path (`/tmp/x`, `../repo/.git/hooks/h`) nor a hidden file. Both
# names are checked with string methods, not patterns: a pattern is compiled at every start.
_FILE_NAME_CHARACTERS = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-."
)


def _is_metric_name(name: str) -> bool:
    """Whether ``name`` is a metric's name: ASCII letters, digits and ``_``, not starting with
    a digit (``[A-Za-z_][A-Za-z0-9_]*``)."""
    return name.isascii() and name.isidentifier()


def _is_validator_name(name: str) -> bool:
    """Whether ``name`` is a validator's name: ASCII letters, digits, ``_``, ``-`` and ``.``,
    not starting with ``.`` (``[A-Za-z0-9_-][A-Za-z0-9_.-]*``)."""
    return name[:1] not in ("", ".") and _FILE_NAME_CHARACTERS.issuperset(name)


@record
class Limits:
    """``[task] limits``: what the agent's code may use in the jail."""

    processes: int = DEFAULT_PROCESSES
    memory_mib: int = DEFAULT_MEMORY_MIB  # the data segment of each process
    file_size_mib: int = DEFAULT_FILE_SIZE_MIB  # the largest file it may write


@record
class Task:
    """``[task]``: how the suite is run, and what running it leaves behind."""

    test_command: str | None = None
    prepare: tuple[str, ...] = ()
    artefacts: tuple[str, ...] = ()
    # Secret-looking variables the suite may see all the same (never a provider's key).
    pass_env: tuple[str, ...] = ()
    # The jail the agent's code (suite, prepare, hidden tests) runs in.
    network: bool = False
    isolation: str = "preferred"  # or "required": never run the agent's code outside the jail
    limits: Limits = Limits()
    readable: tuple[str, ...] = ()  # more folders (absolute) shown read-only in the jail

    @property
    def jail(self) -> JailPolicy:
        """The jail policy these keys declare."""
        from trysquare.jail import JailPolicy  # loaded by what runs the agent's code

        return JailPolicy(
            network=self.network,
            required=self.isolation == "required",
            processes=self.limits.processes,
            memory_mib=self.limits.memory_mib,
            file_size_mib=self.limits.file_size_mib,
            readable=self.readable,
        )

    # Describe how runs were produced: accepted, not interpreted.
    repo: Any = None
    etalon: Any = None
    prompt: Any = None


@record
class Verdict:
    """``[verdict]``: which cell is the reference and what a verdict rests on."""

    reference: str | None = None
    criteria: tuple[str, ...] | None = None
    validity: tuple[str, ...] = ()
    agreement: tuple[tuple[str, str], ...] = ()
    # How a gap is decided: "fixed" (one look at a sample size fixed in advance; the default)
    # or "anytime" (look after every run); correction for many gaps: "none" or "holm".
    stopping: str = "fixed"
    correction: str = "none"


@record
class _Header:
    name: str | None = None
    description: str | None = None


@record
class _ScenarioFile:
    task: Task = Task()
    validation: tuple[dict[str, Any], ...] = ()
    verdict: Verdict | None = None
    scenario: _Header | None = None
    # Sections that describe how runs are produced: accepted, not interpreted.
    agent: Any = None
    protocol: Any = None
    axes: Any = None
    values: Any = None
    variants: Any = None
    harness: Any = None


@record
class Scenario:
    """A loaded scenario: its task, its validations and its verdict rules."""

    path: Path
    name: str
    task: Task
    validations: tuple[Validation, ...]
    verdict: Verdict
    axes: Any = None
    variants: Any = None
    # Variables no validator or suite may see: {name: where it is configured} (a judge's keys).
    protected_env: Mapping[str, str] = attrs.field(factory=dict, hash=False)

    @property
    def folder(self) -> Path:
        return self.path.parent

    def validation(self, name: str) -> Validation:
        for validation in self.validations:
            if validation.name == name:
                return validation
        names = ", ".join(v.name for v in self.validations)
        raise ScenarioError(f"{self.path.name} has no validator named '{name}' (it has: {names})")

    @property
    def declared_metrics(self) -> dict[str, Validation]:
        """Every declared metric, and the validation that declares it."""
        return {metric: v for v in self.validations for metric in v.metrics}


def load_scenario(
    path: Path,
    modes: Mapping[str, Mode] | None = None,
    *,
    config: Path | None = None,
    runs_validators: bool = True,
) -> Scenario:
    """Load and check ``path``; raise :class:`ScenarioError` with one sentence otherwise.

    ``modes`` defaults to the installed plugins' modes; ``config`` is a
    ``trysquare.toml`` named on the command line (modes that read one look for
    the nearest above the scenario otherwise). A command that runs no validator and none
    of the agent's code (``report``, ``plan``, ``trust``) passes ``runs_validators=False``:
    the keys the plugins guard are then gathered only to check a ``pass_env`` against them
    (the scenario's ``protected_env`` is empty otherwise), so no judge loads for them.
    """
    if config is not None and not Path(config).is_file():
        raise ScenarioError(f"--config {config}: no such file")
    path = Path(path).absolute()
    config = None if config is None else Path(config).absolute()
    if not path.exists():
        raise ScenarioError(f"{path}: no such scenario file")
    data = _convert.read_toml(path, error=ScenarioError, label=path.name)
    raw = _convert.structure(data, _ScenarioFile, file=path)
    _check_task(path, raw.task)
    _check_something_measured(path, raw.validation)
    # Only the plugins of the modes this scenario names need to load.
    named = {t["mode"] for t in raw.validation if isinstance(t.get("mode"), str)}
    installed = modes is None
    if modes is None:
        modes = _installed_modes(named)
    validations = _load_validations(path, config, raw.validation, modes)
    protected_env = (
        _protected_env(path, config)
        if runs_validators or _passes_env(raw.task, raw.validation)
        else {}
    )
    if installed:
        kept = _installed_modes(named)
        if not (named & modes.keys()) <= kept.keys():
            # Asking for the keys refused a plugin whose mode this scenario names: so is this.
            _load_validations(path, config, raw.validation, kept)
    scenario = Scenario(
        path=path,
        name=(raw.scenario.name if raw.scenario and raw.scenario.name else path.stem),
        task=raw.task,
        validations=validations,
        verdict=raw.verdict or Verdict(),
        axes=raw.axes,
        variants=raw.variants,
        protected_env=protected_env,
    )
    _check_pass_env(scenario)
    _check_validations(scenario)
    _check_verdict(scenario)
    for index, validation in enumerate(scenario.validations, start=1):
        validation.check(scenario, TableSource(path, f"[[validation]][{index}]", config))
    return scenario


def _check_task(path: Path, task: Task) -> None:
    if task.test_command is not None:
        if not task.test_command.strip():
            raise ScenarioError(
                f"{path.name}: task.test_command is empty; remove the key to declare no suite"
            )
        _vet_command(path, "task.test_command", task.test_command)
        _refuse_agent_script(path, task.test_command)
    for index, command in enumerate(task.prepare, start=1):
        if not command.strip():
            raise ScenarioError(f"{path.name}: task.prepare[{index}] is empty")
        _vet_command(path, f"task.prepare[{index}]", command)
    _check_artefacts(path, task.artefacts)
    _check_jail_keys(path, task)


def _check_jail_keys(path: Path, task: Task) -> None:
    if task.isolation not in ("preferred", "required"):
        raise ScenarioError(
            f'{path.name}: task.isolation is {task.isolation!r}; use "required" (never run the '
            'agent\'s code outside the jail) or "preferred" (the default: fall back, loudly)'
        )
    for key in ("processes", "memory_mib", "file_size_mib"):
        value = getattr(task.limits, key)
        if isinstance(value, bool) or value < 1:
            raise ScenarioError(
                f"{path.name}: task.limits.{key} is {value!r}; it must be a positive whole number"
            )
    for index, folder in enumerate(task.readable, start=1):
        if not folder.startswith("/"):
            raise ScenarioError(
                f"{path.name}: task.readable[{index}] is {folder!r}; name an absolute folder"
            )


def _check_something_measured(path: Path, tables: Sequence[Any]) -> None:
    # Without a validator, `validate` would record nothing and every cell would
    # read "publishable" with no metric: a scenario that measures nothing is a mistake.
    if not tables:
        raise ScenarioError(
            f"{path.name}: no [[validation]] table; declare at least one validator "
            '(mode = "script", "judge" or "form")'
        )


def _check_artefacts(path: Path, artefacts: Sequence[str]) -> None:
    # A blank pattern matches nothing, or (once stripped of "/" and "./") the
    # whole tree: either way not what was meant, and by-products would be scored.
    for index, pattern in enumerate(artefacts, start=1):
        named = pattern.rstrip("/")
        while named.startswith("./"):
            named = named[2:]
        if named.lstrip("/").strip() in ("", "."):
            raise ScenarioError(
                f"{path.name}: task.artefacts[{index}] is {pattern!r}, which names no path; "
                'remove it or name the by-product (e.g. "__pycache__")'
            )


def _passes_env(task: Task, tables: Sequence[Any]) -> bool:
    """Whether the scenario passes any variable by name (``task`` or a ``[[validation]]``)."""
    return bool(task.pass_env) or any(
        isinstance(table, Mapping) and table.get("pass_env") for table in tables
    )


def _load_validations(
    path: Path, config: Path | None, tables: Sequence[Any], modes: Mapping[str, Mode]
) -> tuple[Validation, ...]:
    return tuple(
        _load_validation(table, TableSource(path, f"[[validation]][{index}]", config), modes)
        for index, table in enumerate(tables, start=1)
    )


def _installed_modes(names: set[str]) -> Mapping[str, Mode]:
    from trysquare import plugins

    return plugins.modes(names)


def _protected_env(path: Path, config: Path | None) -> dict[str, str]:
    """Every variable a plugin guards (a judge provider's key), gathered through a hook."""
    from trysquare import plugins

    return plugins.protected_env(path, config)


def _check_pass_env(scenario: Scenario) -> None:
    """Refuse a ``pass_env`` that is not a list of names, or that names a guarded key."""
    tables = [("task.pass_env", scenario.task.pass_env)] + [
        (f"[[validation]][{index}].pass_env", getattr(validation, "pass_env", ()))
        for index, validation in enumerate(scenario.validations, start=1)
    ]
    if not any(names for _, names in tables):
        return  # most scenarios pass no variable: the name rules are not even imported
    from trysquare._env import is_env_name

    for key, names in tables:
        for name in names:
            if not is_env_name(name):
                raise ScenarioError(
                    f"{scenario.path.name}: {key}: '{name}' is not a variable name "
                    "(letters, digits, '_')"
                )
            if name in scenario.protected_env:
                raise ScenarioError(
                    f"{scenario.path.name}: {key}: '{name}' is a judge provider's key "
                    f"({scenario.protected_env[name]}); a provider's key never reaches "
                    "validators or the suite"
                )


def _vet_command(path: Path, key: str, command: str) -> None:
    from trysquare._words import ShellWordError, split_command

    try:
        split_command(command)
    except ShellWordError as error:
        raise ScenarioError(f"{path.name}: {key}: {error}") from None


# Programs whose suite is a script the measured agent may edit (package.json's scripts,
# a Makefile, tox.ini, noxfile.py...): naming them as test_command would let a run
# redefine how it is measured ("test": "echo '# tests 4'"). Per program, the
# subcommands that run such a script (None: any use of the program does).
_SCRIPT_RUNNERS: dict[str, tuple[frozenset[str] | None, str]] = {
    "npm": (
        frozenset(
            {
                "test",
                "t",
                "tst",
                "run",
                "run-script",
                "rum",
                "urn",
                "it",
                "cit",
                "install-test",
                "install-ci-test",
                "start",
            }
        ),
        "package.json's scripts",
    ),
    "pnpm": (
        frozenset({"test", "t", "tst", "run", "run-script", "it", "install-test", "start"}),
        "package.json's scripts",
    ),
    "bun": (frozenset({"run"}), "package.json's scripts"),
    "make": (None, "the Makefile"),
    "gmake": (None, "the Makefile"),
    "tox": (None, "tox.ini (or tox.toml, pyproject.toml)"),
    "nox": (None, "noxfile.py"),
    "just": (None, "the justfile"),
    "task": (None, "Taskfile.yml"),
    "rake": (None, "the Rakefile"),
    "invoke": (None, "tasks.py"),
    "hatch": (frozenset({"run", "test"}), "pyproject.toml's hatch environments"),
    "pdm": (frozenset({"run", "test"}), "pyproject.toml's pdm scripts"),
}
# yarn runs a package.json script of any name it is given (`yarn jest` runs a script
# called jest before the binary), except through these.
_YARN_BINARIES = frozenset({"exec", "node", "dlx", "bin"})
# Options of those programs that take the next word as their value.
_VALUED_OPTIONS = frozenset(
    {
        "--prefix",
        "-C",
        "--dir",
        "--cwd",
        "--workspace",
        "-w",
        "--filter",
        "-F",
        "-f",
        "--file",
        "--makefile",
        "-e",
        "--env",
        "-c",
        "--conf",
        "--root",
        "--noxfile",
    }
)


def _refuse_agent_script(path: Path, command: str) -> None:
    """Refuse a test_command whose suite is defined by a file inside the clone."""
    import posixpath

    from trysquare._words import split_command

    words = split_command(command)
    while words and ("=" in words[0] and not words[0].startswith("-") or words[0] == "env"):
        words = words[1:]  # VAR=value and `env` before the program
    if not words:
        return
    program = posixpath.basename(words[0])
    operands: list[str] = []
    skip = False
    for word in words[1:]:
        if skip:
            skip = False
        elif word.startswith("-"):
            skip = word in _VALUED_OPTIONS
        else:
            operands.append(word)
    sub = operands[0] if operands else None
    if program == "yarn":
        if sub in _YARN_BINARIES:
            return
        where = "package.json's scripts"
    else:
        runner = _SCRIPT_RUNNERS.get(program)
        if runner is None or (runner[0] is not None and sub not in runner[0]):
            return
        where = runner[1]
    raise ScenarioError(
        f"{path.name}: task.test_command {command!r} runs a suite defined in {where}, inside the "
        "clone the measured agent may edit (a run could redefine it as `echo ok` and pass): "
        f"name the runner itself, as {where} say at the base commit — e.g. test_command = "
        '"node --test", "npx mocha", "python3 -m pytest" (why: docs/javascript.md)'
    )


def _load_validation(
    table: Mapping[str, Any], source: TableSource, modes: Mapping[str, Mode]
) -> Validation:
    mode_name = table.get("mode")
    if not isinstance(mode_name, str):
        raise source.refuse("mode", "required, a string naming the mode (script, judge, form, ...)")
    mode = modes.get(mode_name)
    if mode is None:
        raise ScenarioError(
            f"{source.file.name}: {source.path}.mode: {_missing_mode(mode_name, modes)}"
        )
    from trysquare.plugins import plugin_output

    with plugin_output():  # a mode's print never reaches a document on stdout
        validation = mode.load(table, source)
    return attrs.evolve(validation, name=validation.name or validation.mode)


def _missing_mode(name: str, modes: Mapping[str, Mode]) -> str:
    message = f"no installed plugin provides mode '{name}'"
    if name in KNOWN_MODE_DISTRIBUTIONS:
        from trysquare._install import install_hint

        return f"{message} ({install_hint(KNOWN_MODE_DISTRIBUTIONS[name])})"
    import difflib

    close = difflib.get_close_matches(name, list(modes), n=1)
    return f"{message} (did you mean '{close[0]}'?)" if close else message


def _check_validations(scenario: Scenario) -> None:
    file = scenario.path.name
    names: dict[str, int] = {}
    owners: dict[str, str] = {}
    for index, validation in enumerate(scenario.validations, start=1):
        where = f"{file}: [[validation]][{index}]"
        if not _is_validator_name(validation.name):
            raise ScenarioError(
                f"{where}.name: {validation.name!r} is not a plain file name (letters, digits, "
                "'_', '-', '.', not starting with '.'); it names files inside each run folder"
            )
        if validation.name in names:
            raise ScenarioError(
                f"{where}: name '{validation.name}' is also the name of [[validation]]"
                f"[{names[validation.name]}]; give one of them another name"
            )
        names[validation.name] = index
        if not validation.metrics:
            raise ScenarioError(f"{where}.metrics: declares no metric")
        for metric in validation.metrics:
            if not _is_metric_name(metric):
                raise ScenarioError(
                    f"{where}.metrics: '{metric}' is not a metric name (letters, digits, '_')"
                )
            if metric in PIECES:
                raise ScenarioError(
                    f"{where}.metrics: '{metric}' is the name of a piece; rename the metric"
                )
            if metric in owners and owners[metric] == validation.name:
                raise ScenarioError(f"{where}.metrics: '{metric}' is declared twice")
            if metric in owners:
                raise ScenarioError(
                    f"{where}.metrics: '{metric}' is also declared by validator "
                    f"'{owners[metric]}'; rename one (e.g. '{metric}_{validation.mode}')"
                )
            owners[metric] = validation.name
        if "tests" in validation.metrics and scenario.task.test_command is None:
            raise ScenarioError(
                f"{where}.metrics: 'tests' is declared but [task] has no test_command; "
                "declare the suite that decides it"
            )


def _check_verdict(scenario: Scenario) -> None:
    declared = scenario.declared_metrics
    verdict = scenario.verdict
    file = scenario.path.name
    named: list[tuple[str, Sequence[str]]] = [
        ("criteria", verdict.criteria or ()),
        ("validity", verdict.validity),
    ]
    named += [(f"agreement[{i}]", pair) for i, pair in enumerate(verdict.agreement, start=1)]
    choices = {"stopping": ("fixed", "anytime"), "correction": ("none", "holm")}
    for key, allowed in choices.items():
        value = getattr(verdict, key)
        if value not in allowed:
            said = " or ".join(f'"{choice}"' for choice in allowed)
            raise ScenarioError(f"{file}: verdict.{key} is {value!r}; use {said}")
    for key, metrics in named:
        for metric in metrics:
            if metric not in declared:
                import difflib

                close = difflib.get_close_matches(metric, list(declared), n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                raise ScenarioError(
                    f"{file}: verdict.{key}: '{metric}' is not a metric any validator "
                    f"declares{hint}"
                )
