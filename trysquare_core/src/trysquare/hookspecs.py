"""The hooks a trysquare plugin may implement.

Only markers and specifications live here; the manager is in
:mod:`trysquare.plugins`. Every hook is called with keyword arguments, and a
hook implementation must not give its parameters defaults (pluggy passes only
what the spec names). Each hook has a section in ``docs/plugins.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import pluggy

if TYPE_CHECKING:
    from pathlib import Path

    from trysquare.executors import Executor

    from trysquare.modes import Mode, Outcome, Validation
    from trysquare.commands import Commands
    from trysquare.report.formats import ReportFormat
    from trysquare.runs import Run
    from trysquare.sessions import SessionFormat

PROJECT_NAME = "trysquare"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)

_Spec = TypeVar("_Spec", bound=Callable[..., Any])
# The attribute listed_as sets on a registry hookspec; read by trysquare.plugins.
LISTED_AS = "trysquare_listed_as"


def listed_as(column: str, kind: str) -> Callable[[_Spec], _Spec]:
    """Mark a registry hookspec (``trysquare_register_X(register)``) as one ``trysquare
    plugins`` lists: what each plugin registers through it shows under ``column`` (one of
    the columns of ``trysquare plugins --json``), and a name refused because another plugin
    has it is called a ``kind``. Put it above ``@hookspec``; a plugin adding its own registry
    hook marks it the same way, so the core never names another plugin's hook.

    Example::

        @listed_as("providers", "provider")
        @hookspec
        def trysquare_register_my_providers(register): ...
    """

    def mark(spec: _Spec) -> _Spec:
        setattr(spec, LISTED_AS, (column, kind))
        return spec

    return mark


@hookspec(historic=True)
def trysquare_add_hookspecs(pluginmanager: pluggy.PluginManager) -> None:
    """Add hookspecs of a plugin's own, for other plugins to implement.

    Called once for every plugin as it is registered (a historic hook), before
    any other hook of the plugin is called.

    :param pluginmanager: trysquare's ``pluggy.PluginManager``: call its
        ``add_hookspecs(module)`` with the module holding your specs, marked
        with :data:`trysquare.hookspecs.hookspec`.

    Example::

        @hookimpl
        def trysquare_add_hookspecs(pluginmanager):
            from trysquare_judge import hookspecs
            pluginmanager.add_hookspecs(hookspecs)
    """


@listed_as("modes", "mode")
@hookspec
def trysquare_register_modes(register: Callable[[Mode], None]) -> None:
    """Register validator modes: what a ``[[validation]]`` table's ``mode`` names.

    :param register: call it once per mode. A mode has a ``name`` (the value of
        ``mode = "..."``) and a ``load(table, where)`` method turning one
        ``[[validation]]`` table into a :class:`trysquare.modes.Validation`.
        A name registered by two plugins is refused, naming both.

    Example::

        @hookimpl
        def trysquare_register_modes(register):
            register(ScriptMode())
    """


@listed_as("session_formats", "session format")
@hookspec
def trysquare_register_session_formats(register: Callable[[SessionFormat], None]) -> None:
    """Register readers of agent session logs (``session_format`` in ``run.toml``).

    :param register: call it once per format. A format has a ``name``, a
        ``sniff(head)`` telling from the first parsed lines whether a log is
        its own, and the readers described in :mod:`trysquare.sessions`.

    Example::

        @hookimpl
        def trysquare_register_session_formats(register):
            register(AiderFormat())
    """


@hookspec
def trysquare_build_context(
    run: Run, validation: Validation, context: Mapping[str, Any]
) -> Mapping[str, Any] | None:
    """Add keys to the context a validator is handed.

    :param run: the run being validated.
    :param validation: the validator the context is for.
    :param context: the core's context so far (read-only).
    :return: extra keys, or ``None``. A key that collides with a core key or with
        another plugin's key is refused: the run is reported and skipped.

    Example::

        @hookimpl
        def trysquare_build_context(run, validation, context):
            return {"ticket": str(run.dir / "ticket.md")}
    """


@hookspec
def trysquare_metrics_collected(run: Run, validation: Validation, outcome: Outcome) -> None:
    """Observe each recorded outcome (an experiment tracker, a database).

    Called once per run and validator, after the result is written to disk. An
    observer that raises is reported as a warning; the result stays recorded.

    :param run: the run that was validated.
    :param validation: the validator that produced ``outcome``.
    :param outcome: metrics, reasons, state and error as recorded.

    Example::

        @hookimpl
        def trysquare_metrics_collected(run, validation, outcome):
            tracker.log(run.id, outcome.metrics)
    """


@hookspec
def trysquare_register_commands(cli: Commands) -> None:
    """Add subcommands to the ``trysquare`` command line.

    :param cli: a :class:`trysquare.api.Commands`. ``cli.add(name,
        handler, help=...)`` returns the command's ``argparse.ArgumentParser``
        for its arguments; ``handler`` receives the parsed ``argparse.Namespace``
        and returns an exit code. The commands join the command line once the
        hook returns; a hook that raises adds none and its plugin is reported.

    Example::

        @hookimpl
        def trysquare_register_commands(cli):
            parser = cli.add("form", run_form, help="fill metrics by hand")
            parser.add_argument("scenario", type=Path)
    """


@listed_as("executors", "executor")
@hookspec
def trysquare_register_executors(register: Callable[[Executor], None]) -> None:
    """Register executors: where ``trysquare validate --executor NAME`` runs its tasks.

    :param register: call it once per executor. An executor has a ``name`` and
        a ``configure(options, jobs=...)`` returning an object whose
        ``run(tasks, should_stop=...)`` yields ``(task, document)`` as each task
        finishes, each task recorded by :func:`trysquare.api.execute_task`
        (the protocols are :class:`trysquare.executors.Executor` and
        :class:`trysquare.executors.RunningExecutor`).
        The built-in ``local`` executor is a bounded thread pool.

    Example::

        @hookimpl
        def trysquare_register_executors(register):
            register(DaskExecutor())
    """


@hookspec
def trysquare_protected_env(scenario_file: Path, config: Path | None) -> Mapping[str, str] | None:
    """Name the environment variables that hold secrets a plugin guards (a judge's keys).

    The core never imports a plugin to learn them: at load, every answer is
    gathered, and those variables are removed from the environment of script
    validators and the suite, and refused in any ``pass_env``.

    :param scenario_file: the scenario being loaded (absolute).
    :param config: the ``trysquare.toml`` named by ``--config``, or ``None``.
    :return: ``{variable name: where it is configured}`` (the text goes into the
        refusal of a ``pass_env`` naming it), or ``None``.

    Example::

        @hookimpl
        def trysquare_protected_env(scenario_file, config):
            return {"MY_SERVICE_TOKEN": "my-plugin's service key"}
    """


@listed_as("report_formats", "report format")
@hookspec
def trysquare_register_report_formats(register: Callable[[ReportFormat], None]) -> None:
    """Register report formats: what ``trysquare report --format NAME`` writes.

    :param register: call it once per format. A format has a ``name`` (the value
        of ``--format``), a ``description`` (one line for ``--help``), a
        ``suffix`` (``".html"``) and a ``render(source)`` method returning the
        report as text, where ``source`` is a
        :class:`trysquare.report.formats.ReportSource`: the report as plain data
        (what ``--format json`` prints), every run's ``measures.json`` row, and
        each run's folder. A name registered by two plugins is refused, naming both.
        The core registers ``md``, ``json`` and ``csv`` this way; ``trysquare-view``
        registers ``html``.

    Example::

        @hookimpl
        def trysquare_register_report_formats(register):
            register(LatexFormat())
    """
