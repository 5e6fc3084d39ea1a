"""The plugin manager: loaded lazily, once, with every plugin guarded on its own.

Plugins are found through the ``trysquare`` entry-point group (the name of each
entry point is its distribution's name). Every hook is called on each plugin
on its own (pluggy's ``subset_hook_caller``): one that fails to import, to
register or raises from a hook is reported here and in ``trysquare plugins``,
is left out of later hooks, and the others carry on. ``TRYSQUARE_LOAD_PLUGINS`` (empty: none; a comma list: only
those) and ``TRYSQUARE_BLOCK_PLUGINS`` (a comma list never loaded) choose which
entry points load. Blocking a plugin also blocks the plugins whose distribution requires it
(a judge provider without the judge); a plugin chosen without one it requires fails, saying so.

It is over 600 lines because finding, loading on demand, guarding and listing plugins share
one state and one lock; the stdout router and the distributions' metadata could move out.
"""

from __future__ import annotations

import os
import sys
import threading
import types
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import attrs
import pluggy

from trysquare import _entry_points, hookspecs
from trysquare._entry_points import Found
from trysquare._record import mutable_record, record
from trysquare.hookspecs import LISTED_AS

if TYPE_CHECKING:
    import argparse
    from pathlib import Path

    from trysquare.modes import Mode
    from trysquare.plugin_info import PluginInfo
    from trysquare.sessions.reading import SessionFormat

__all__ = [
    "PluginInfo",
    "add_commands",
    "call_each",
    "get_manager",
    "hook_callers",
    "infos",
    "modes",
    "plugin_output",
    "protected_env",
    "registry",
    "report_formats",
    "reset",
    "session_formats",
]

ENTRY_POINT_GROUP = "trysquare"
# In-tree defaults, registered after entry points so that plugins may come first.
BUILTIN_MODULES = ("trysquare.sessions.builtin", "trysquare.executors", "trysquare.report.formats")
# The distributions `pip install trysquare` brings: built-in too. A name one of them or a
# module above registers (a mode, provider, session or report format, executor) stays
# theirs: another plugin registering it is refused that name, and keeps the rest.
BUILTIN_DISTRIBUTIONS = ("trysquare-form", "trysquare-judge", "trysquare-script", "trysquare-view")


# The columns ``trysquare plugins`` lists a plugin's registrations in, in their order
# (:class:`trysquare.plugin_info.PluginInfo`'s: a listed registry's column is one of these).
COLUMNS = ("modes", "providers", "session_formats", "executors", "report_formats")


def __getattr__(name: str) -> Any:
    # Built on first use: only ``trysquare plugins`` needs the record, and building an attrs
    # class is not free on every command's start.
    if name == "PluginInfo":
        from trysquare.plugin_info import PluginInfo

        return PluginInfo
    raise AttributeError(f"module 'trysquare.plugins' has no attribute {name!r}")


# What a plugin declares it provides, so that a command loads only the plugins it needs:
# entry points of this group named ``KIND.NAME`` (``mode.script``, ``provider.anthropic``,
# ``report_format.html``, ``executor.dask``, ``session_format.pi``, ``command.view``) or
# ``hook.HOOK`` (``hook.trysquare_protected_env``: a hook whose every implementation must
# be asked), whose value is the plugin's module. A distribution that declares nothing is
# loaded by every command that loads plugins, as before declarations existed.
PROVIDES_GROUP = "trysquare.provides"


def _declared_kind(hook_name: str) -> str | None:
    """The ``KIND`` a plugin declares for what ``hook_name`` registers (``mode``, ``provider``,
    ``report_format``, ``command``): a registry's column in ``trysquare plugins`` (its
    :func:`~trysquare.hookspecs.listed_as` mark) in the singular, so a plugin's own registry
    (the judge's providers) needs no entry here."""
    if hook_name == "trysquare_register_commands":
        return "command"
    listed = listed_registries().get(hook_name)
    return None if listed is None else listed[0].removesuffix("s")


# The hooks a plugin that declares anything must declare as ``hook.HOOK`` to be called.
DECLARED_HOOKS = frozenset(
    {"trysquare_build_context", "trysquare_metrics_collected", "trysquare_protected_env"}
)

# ``protected_env.NAME``: a variable a plugin guards whatever the scenario, withheld by every
# command that gathers the guarded keys without importing the plugin to learn it. A plugin
# declaring its keys so is asked only when it is loaded for another reason, and then must
# name no key nobody declared (it is refused otherwise: its answer could not be known
# without importing it, so a command that did not load it would let that key through).
PROTECTED_PREFIX = "protected_env."
# Declared by a plugin whose guarded keys also come from the ``trysquare.toml`` in force (a
# judge's ``[providers.NAME].api_key_env``): its hook is asked whenever one is in force.
PROTECTED_WITH_CONFIG = "hook_with_config.trysquare_protected_env"
CONFIG_FILE = "trysquare.toml"

# The in-tree defaults declare what they register here: importing them is not free either.
BUILTIN_PROVIDES = {
    "trysquare.sessions.builtin": frozenset(
        {"session_format.pi", "session_format.claude-code", "session_format.codex"}
    ),
    "trysquare.executors": frozenset({"executor.local"}),
    "trysquare.report.formats": frozenset(
        {"report_format.md", "report_format.json", "report_format.csv"}
    ),
}


@record
class _Candidate:
    """A plugin that may load: an entry point (or an in-tree default) not imported yet."""

    name: str
    entry_point: Found | None  # None: an in-tree default module
    provides: frozenset[str] | None  # None: it declares nothing, so every command loads it
    needs: frozenset[str]  # the plugins its distribution requires (load first)


@mutable_record
class _State:
    manager: pluggy.PluginManager
    versions: dict[str, str | None]
    failures: dict[str, str]
    registries: dict[str, dict[str, tuple[Any, str]]] = attrs.field(factory=dict)
    registered_by: dict[str, dict[str, list[str]]] = attrs.field(factory=dict)
    callers: dict[str, list[tuple[str, Any]]] = attrs.field(factory=dict)
    builtin: set[str] = attrs.field(factory=set)  # plugin names that are built-in
    refusals: dict[str, list[str]] = attrs.field(factory=dict)
    waiting: dict[str, _Candidate] = attrs.field(factory=dict)  # by name, not loaded yet
    warned: set[str] = attrs.field(factory=set)  # failures already printed
    declared: set[str] = attrs.field(factory=set)  # every KIND.NAME any plugin declares
    # What each plugin declares (None: nothing), loaded or not.
    provides: dict[str, frozenset[str] | None] = attrs.field(factory=dict)
    # Whether a plugin other than a built-in one was imported (or tried to be).
    foreign_imported: bool = False


_state: _State | None = None
# Loading may be asked for from worker threads (a context hook during validate).
_load_lock = threading.RLock()


def _names(variable: str) -> set[str] | None:
    value = os.environ.get(variable)
    if value is None:
        return None
    return {name.strip() for name in value.split(",") if name.strip()}


def _describe(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


# Values a module's attribute may hold that are never a hook (nor can pass for one: their
# type answers isinstance itself), so pluggy's static lookup of each is spared.
_NEVER_HOOKS = frozenset(
    {type, types.ModuleType, str, int, bool, float, tuple, list, dict, set, frozenset}
    | {type(None), types.BuiltinFunctionType}
)


class _Manager(pluggy.PluginManager):
    """pluggy's manager, finding a module's hooks in the module's own namespace.

    pluggy looks each name of a plugin (or of the hook specifications) up with
    ``inspect.getattr_static``, which walks the module type's whole MRO for each: for a
    module, what it finds is the module's own value, whenever that value is a plain function
    (whose marker is then read as pluggy reads it) or of a type that is never a hook (no
    marker to read). Any other value, and any plugin that is no plain module, goes to
    pluggy's own lookup (the overriding is pluggy's documented way to change discovery)."""

    def parse_hookimpl_opts(self, plugin: Any, name: str) -> Any:
        found, opts = _module_marker(plugin, name, f"{self.project_name}_impl")
        return opts if found else super().parse_hookimpl_opts(plugin, name)

    def parse_hookspec_opts(self, module_or_class: Any, name: str) -> Any:
        found, opts = _module_marker(module_or_class, name, f"{self.project_name}_spec")
        return opts if found else super().parse_hookspec_opts(module_or_class, name)


def _module_marker(holder: Any, name: str, marker: str) -> tuple[bool, Any]:
    """(whether it was decided here, the marker's options) for ``holder.name``."""
    # A name the module type itself has (``__annotations__``, ``__dict__``, ...) may be a
    # descriptor that getattr_static finds before the module's value: pluggy's business.
    if type(holder) is not types.ModuleType or name in _MODULE_TYPE_NAMES:
        return False, None
    value = holder.__dict__.get(name, _absent)
    kind = type(value)
    if kind is types.FunctionType:  # read as pluggy reads a marker, __func__ too
        opts = getattr(value, marker, None)
        if opts is None:
            inner = getattr(value, "__func__", None)
            opts = None if inner is None else getattr(inner, marker, None)
        return True, opts if isinstance(opts, dict) else None
    return kind in _NEVER_HOOKS, None


_absent = object()
_MODULE_TYPE_NAMES = frozenset(dir(types.ModuleType))


def _start(*, fresh: bool = False) -> _State:
    """The manager and the plugins that may load, from metadata alone: nothing is imported
    (with ``fresh``, the installed distributions are read again, whatever the cache holds)."""
    manager = _Manager(hookspecs.PROJECT_NAME)
    manager.add_hookspecs(hookspecs)
    # pytest's idiom: a plugin brings hookspecs of its own (the judge: providers) from
    # this historic hook, which pluggy also calls for every plugin registered later.
    manager.hook.trysquare_add_hookspecs.call_historic(kwargs={"pluginmanager": manager})
    state = _State(manager, {}, {})
    only = _names("TRYSQUARE_LOAD_PLUGINS")
    blocked = _names("TRYSQUARE_BLOCK_PLUGINS") or set()
    # Both groups, from one scan of the installed distributions (kept until they change).
    found = _entry_points.scan(fresh=fresh)
    entry_points = _claimed(
        state, blocked, only, [item for item in found if item.group == ENTRY_POINT_GROUP]
    )
    plugin_names = {entry_point.name for entry_point in entry_points}
    declared = _declarations([item for item in found if item.group == PROVIDES_GROUP])
    for entry_point in entry_points:
        name = entry_point.name
        dist = _dist_name(entry_point)
        if name in blocked or dist in blocked or (only is not None and not {name, dist} & only):
            continue
        needed = _needed_plugins(entry_point) & plugin_names
        if needed & blocked:
            continue  # blocking a plugin blocks the plugins built on it (a judge's providers)
        state.versions[name] = _dist_version(entry_point)
        left_out = sorted(needed - only) if only is not None else []
        if left_out:
            state.failures[name] = (
                f"needs {', '.join(left_out)}, which TRYSQUARE_LOAD_PLUGINS leaves out"
            )
            continue
        if name in BUILTIN_DISTRIBUTIONS:
            state.builtin.add(name)
        state.waiting[name] = _Candidate(
            name, entry_point, declared.get(dist or ""), frozenset(needed)
        )
    for module_name, provides in BUILTIN_PROVIDES.items():
        state.waiting[module_name] = _Candidate(module_name, None, provides, frozenset())
    for candidate in state.waiting.values():
        state.declared.update(candidate.provides or ())
        state.provides[candidate.name] = candidate.provides
    return state


def _declarations(entry_points: Iterable[Found]) -> dict[str, frozenset[str]]:
    """What each distribution declares it provides, by normalized distribution name."""
    found: dict[str, set[str]] = {}
    for entry_point in entry_points:
        dist = _dist_name(entry_point)
        if dist is not None:
            found.setdefault(dist, set()).add(entry_point.name)
    return {dist: frozenset(names) for dist, names in found.items()}


def _ensure(state: _State, wanted: Callable[[frozenset[str]], bool]) -> None:
    """Load every waiting plugin that declares nothing or declares something ``wanted``
    (with the plugins it requires), then register them, the in-tree defaults last."""
    with _load_lock:
        chosen = {
            name for name, candidate in state.waiting.items()
            if candidate.provides is None or wanted(candidate.provides)
        }  # fmt: skip
        pending = list(chosen)
        while pending:  # a provider plugin needs the judge's hookspecs: load the judge too
            for needed in state.waiting[pending.pop()].needs:
                if needed in state.waiting and needed not in chosen:
                    chosen.add(needed)
                    pending.append(needed)
        if not chosen:
            return
        loaded: list[tuple[str, Any]] = []
        candidates = {name: state.waiting[name] for name in chosen}
        for name in sorted(chosen, key=_order):
            candidate = state.waiting.pop(name)
            if candidate.entry_point is None:
                continue
            if name not in state.builtin:
                state.foreign_imported = True
            try:
                _loading[:] = [name]
                with plugin_output():
                    loaded.append((name, candidate.entry_point.load()))
            except Exception as error:  # noqa: BLE001 - one broken plugin is only reported
                state.failures[name] = _describe(error)
            finally:
                _loading.clear()
        for name, plugin in loaded:
            _register(state, name, plugin)
            provides = candidates[name].provides
            if provides is not None:
                _check_declared(state, name, plugin, provides)
        for module_name in BUILTIN_PROVIDES:
            if module_name not in chosen:
                continue
            module = __import__(module_name, fromlist=["_"])
            state.builtin.add(module_name)
            _register(state, module_name, module)
        _drop_unspecified(state)
        # What was gathered from fewer plugins is gathered again from all that are in now.
        state.registries.clear()
        state.registered_by.clear()
        state.callers.clear()
        _warn_failures(state)


def _check_declared(state: _State, name: str, plugin: Any, provides: frozenset[str]) -> None:
    """Disable a plugin that declares what it provides but implements a hook it does not
    declare: a command that did not load it for another reason would never call it (a key
    its ``trysquare_protected_env`` guards would reach validators)."""
    manager = state.manager
    if not manager.is_registered(plugin):
        return
    for caller in manager.get_hookcallers(plugin) or []:
        kind = _declared_kind(caller.name)
        if kind is not None:
            if not any(item.startswith(f"{kind}.") for item in provides):
                missing = f"no {kind}.NAME"
                break
        elif caller.name in DECLARED_HOOKS and not _declares_hook(provides, caller.name):
            missing = f"no hook.{caller.name}"
            break
    else:
        return
    manager.unregister(plugin)
    state.failures[name] = (
        f"implements {caller.name} but declares {missing} in its '{PROVIDES_GROUP}' entry points"
    )


def _declares_hook(provides: frozenset[str], hook_name: str) -> bool:
    """Whether ``provides`` declares ``hook_name``: as ``hook.HOOK``, or (the guarded keys)
    as ``hook_with_config.trysquare_protected_env`` or ``protected_env.NAME`` entries."""
    if f"hook.{hook_name}" in provides:
        return True
    return hook_name == "trysquare_protected_env" and (
        PROTECTED_WITH_CONFIG in provides
        or any(item.startswith(PROTECTED_PREFIX) for item in provides)
    )


def _warn_failures(state: _State) -> None:
    for name, error in sorted(state.failures.items()):
        if name not in state.warned:
            state.warned.add(name)
            print(f"trysquare: warning: plugin '{name}' failed to load: {error}", file=sys.stderr)


def _ensure_all(state: _State) -> None:
    _ensure(state, lambda _provides: True)


def _ensure_kind(state: _State, kind: str, names: Iterable[str] | None = None) -> None:
    """Load the plugins declaring ``kind.NAME`` for each of ``names`` (any name: ``None``)."""
    if names is None:
        _ensure(state, lambda provides: any(item.startswith(f"{kind}.") for item in provides))
    else:
        items = {f"{kind}.{name}" for name in names}
        _ensure(state, lambda provides: not items.isdisjoint(provides))


# The entry point being imported now (what a bounded wait for plugins names).
_loading: list[str] = []


def _dist_name(entry_point: Found) -> str | None:
    """The normalized name of the distribution declaring ``entry_point``."""
    return entry_point.dist


def _dist_version(entry_point: Found) -> str | None:
    return entry_point.version


def _claimed(
    state: _State, blocked: set[str], only: set[str] | None, found: Iterable[Found]
) -> list[Found]:
    """The entry points that may load, by name: one for each name, the others refused.

    An entry point name is its distribution's name (``trysquare-script``). When several
    distributions declare one name, the distribution of that name keeps it and each other
    one is refused, listed under its own distribution name (which is how it is blocked);
    with no such distribution, every claimant is refused. A foreign distribution declaring
    a built-in's name is refused even alone: it would stand in for the built-in.
    """
    by_name: dict[str, list[Found]] = {}
    for entry_point in found:
        if _dist_name(entry_point) in blocked and _dist_name(entry_point) != entry_point.name:
            continue  # blocked by its distribution's name (blocked by its own name: later)
        by_name.setdefault(entry_point.name, []).append(entry_point)
    kept: list[Found] = []
    for name, claimants in sorted(by_name.items()):
        owner = next((ep for ep in claimants if _dist_name(ep) == name), None)
        if owner is None and len(claimants) == 1 and name not in BUILTIN_DISTRIBUTIONS:
            owner = claimants[0]  # a third-party entry point named otherwise than its distribution
        dists = sorted({_dist_name(ep) or ep.value for ep in claimants})
        for entry_point in claimants:
            if entry_point is owner:
                continue
            label = _dist_name(entry_point) or entry_point.value
            if only is not None and not {label, name} & only:
                continue  # not chosen: nothing to say about it
            if owner is not None:
                why = f"distribution '{_dist_name(owner)}' has that name"
            elif len(claimants) > 1:
                why = f"distributions {', '.join(repr(d) for d in dists)} all declare it"
            else:
                why = "it is the name of a built-in distribution"
            state.versions[label] = _dist_version(entry_point)
            state.failures[label] = (
                f"declares the entry point name '{name}', refused: {why}; an entry point is named "
                f"after its own distribution (TRYSQUARE_BLOCK_PLUGINS={label} leaves it out)"
            )
        if owner is not None:
            kept.append(owner)
    return kept


def _needed_plugins(entry_point: Found) -> set[str]:
    """The distributions a plugin's own distribution requires (extras aside), by normalized name."""
    names = set()
    for requirement in entry_point.requires:
        if ";" in requirement and "extra" in requirement.split(";", 1)[1]:
            continue
        name = _requirement_name(requirement)
        if name:
            names.add(name)
    return names


_SEPARATORS = frozenset("-_.")
_NAME_CHARACTERS = _SEPARATORS | frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
)


def _requirement_name(requirement: str) -> str | None:
    """The distribution a requirement names (``Trysquare_Core>=1``: ``trysquare-core``), or
    ``None``: its leading ``[A-Za-z0-9][A-Za-z0-9._-]*``, lowercase, each run of ``-``, ``_``
    and ``.`` made one ``-``. Read with string methods: patterns compiled at every start
    would cost more than the few requirements they read."""
    end = 0
    while end < len(requirement) and requirement[end] in _NAME_CHARACTERS:
        end += 1
    if end == 0 or requirement[0] in _SEPARATORS:
        return None
    normalized: list[str] = []
    for char in requirement[:end].lower():
        if char not in _SEPARATORS:
            normalized.append(char)
        elif normalized[-1] != "-":
            normalized.append("-")
    return "".join(normalized)


def _register(state: _State, name: str, plugin: Any) -> None:
    manager = state.manager
    try:
        with plugin_output():  # registering calls the plugin's trysquare_add_hookspecs
            manager.register(plugin, name=name)
    except Exception as error:  # noqa: BLE001 - a bad hookimpl disables this plugin only
        if manager.is_registered(plugin):
            manager.unregister(plugin)
        state.failures[name] = _describe(error)


def _drop_unspecified(state: _State) -> None:
    """Unregister each plugin implementing a hook nobody specified.

    Checked once every plugin of a load is in, since a plugin may implement a hook whose
    spec another plugin adds (a judge provider plugin loads before the judge); while
    plugins wait to load, they load first (any of them may add that spec).
    """
    manager = state.manager
    while True:
        try:
            manager.check_pending()
            return
        except pluggy.PluginValidationError as error:
            if state.waiting:
                _ensure_all(state)  # checks again once they are in
                continue
            name = _name(manager, error.plugin)
            manager.unregister(error.plugin)
            state.failures[name] = _describe(error)


def get_manager() -> pluggy.PluginManager:
    """The plugin manager, with every plugin loaded."""
    state = _get_state()
    _ensure_all(state)
    return state.manager


def _get_state(*, fresh: bool = False) -> _State:
    """The plugin manager's state, with the plugins that declare nothing loaded."""
    global _state
    with _load_lock:
        if _state is None:
            _state = _start(fresh=fresh)
            _ensure(_state, lambda _provides: False)
        return _state


def stop_loading() -> bool:
    """Take the loading lock for good, if no plugin is being loaded (the process ends):
    whether it was taken. Only for a process about to end."""
    return _load_lock.acquire(blocking=False)


def only_builtin_code() -> bool:
    """Whether no plugin but trysquare's own has been imported in this process (or tried to
    be), nor registered by hand: no code of another's ran here."""
    state = _state
    if state is None:
        return True
    if state.foreign_imported:
        return False
    return all(
        name in state.builtin
        for name, plugin in state.manager.list_name_plugin()
        if plugin is not None  # a blocked name holds none
    )


def reset() -> None:
    """Forget the loaded plugins (tests change the environment between loads)."""
    global _state
    _state = None


def registry(hook_name: str, names: Iterable[str] | None = None) -> dict[str, Any]:
    """Call a ``register`` hook once per plugin and return the registered objects by name.

    Each plugin's implementation is called on its own, so a plugin that raises,
    or registers a name another plugin took, is reported and the rest stand. With
    ``names``, only the plugins declaring one of them must load (the others may, and
    every plugin of that kind does when one of ``names`` is declared by none of them).
    """
    state = _get_state()
    kind = _declared_kind(hook_name)
    if kind is None:
        _ensure_all(state)
    elif names is not None:
        wanted = set(names)
        _ensure_kind(state, kind, wanted)
        if not wanted <= set(_registry(state, hook_name)):
            _ensure_kind(state, kind)  # a name nobody declared: every plugin of its kind
    else:
        _ensure_kind(state, kind)
    return _registry(state, hook_name)


def _registry(state: _State, hook_name: str) -> dict[str, Any]:
    if hook_name not in state.registries:
        state.registries[hook_name], state.registered_by[hook_name] = _collect(state, hook_name)
    return {name: value for name, (value, _) in state.registries[hook_name].items()}


def _collect(
    state: _State, hook_name: str
) -> tuple[dict[str, tuple[Any, str]], dict[str, list[str]]]:
    found: dict[str, tuple[Any, str]] = {}
    by_plugin: dict[str, list[str]] = {}
    # Built-ins register first: a name one of them has stays theirs whatever is installed.
    callers = sorted(_callers(state, hook_name), key=lambda item: item[0] not in state.builtin)
    for plugin_name, caller in callers:
        if plugin_name in state.failures:
            continue
        mine: list[tuple[Any, Any]] = []

        def register(item: Any, _mine: list[tuple[Any, Any]] = mine) -> None:
            _mine.append((getattr(item, "name", None), item))

        try:
            with plugin_output():
                caller(register=register)
            for name, item in mine:
                if not isinstance(name, str) or not name:
                    raise TypeError(f"{hook_name} registered {item!r}, which has no name")
        except Exception as error:  # noqa: BLE001 - only this plugin's registrations are lost
            _fail(state, plugin_name, hook_name, error)
            continue
        kept: list[str] = []
        for name, item in mine:
            if name in found:
                # Only this registration is refused: the rest of this plugin stands.
                _refuse(state, plugin_name, hook_name, name, found[name][1])
                continue
            found[name] = (item, plugin_name)
            kept.append(name)
        by_plugin[plugin_name] = kept
    return found, by_plugin


def listed_registries() -> dict[str, tuple[str, str]]:
    """Every registry hook ``trysquare plugins`` lists, the core's and the plugins' own (those
    whose spec is marked with :func:`trysquare.hookspecs.listed_as`): hook name to
    ``(column, kind)``."""
    manager = _get_state().manager
    found: dict[str, tuple[str, str]] = {}
    for hook_name, caller in sorted(vars(manager.hook).items()):
        spec = getattr(caller, "spec", None)
        listed = getattr(getattr(spec, "function", None), LISTED_AS, None)
        if listed is not None:
            found[hook_name] = listed
    rank = {
        hook: COLUMNS.index(column) if column in COLUMNS else len(COLUMNS)
        for hook, (column, _) in found.items()
    }
    return dict(sorted(found.items(), key=lambda item: (rank[item[0]], item[0])))


def _refuse(state: _State, plugin_name: str, hook_name: str, name: str, owner: str) -> None:
    """Refuse one name a plugin registered that another has: a warning, and ``plugins`` says so."""
    kind = listed_registries().get(hook_name, (hook_name, hook_name))[1]
    whose = "the built-in plugin" if owner in state.builtin else "plugin"
    sentence = f"{kind} '{name}' of '{plugin_name}' refused: {whose} '{owner}' registers it"
    if sentence in state.refusals.get(plugin_name, []):
        return
    state.refusals.setdefault(plugin_name, []).append(sentence)
    from trysquare._shown import shown  # a plugin's names are printed escaped

    print(shown(f"trysquare: warning: {sentence}"), file=sys.stderr)


# What a plugin prints (at import, from a hook) goes to stderr: standard output may be
# a document (``--format json``, ``csv``) that must hold nothing else. While any thread
# runs plugin code, ``sys.stdout`` is a router: writes from a thread inside plugin code
# go to stderr, every other thread's to the real stream (help printed while a slow
# plugin imports in the background, a document written while an observer runs).
_output_lock = threading.Lock()
_output_depth = 0
_output_saved: Any = None
_inside = threading.local()


class _Router:
    def __init__(self, target: Any) -> None:
        self._target = target

    def _stream(self) -> Any:
        return sys.stderr if getattr(_inside, "depth", 0) else self._target

    def write(self, text: str) -> int:
        return int(self._stream().write(text))

    def flush(self) -> None:
        self._stream().flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)


@contextmanager
def plugin_output() -> Iterator[None]:
    """Send what plugin code run in this thread prints to standard error while it runs."""
    global _output_depth, _output_saved
    with _output_lock:
        if _output_depth == 0:
            _output_saved = sys.stdout
            sys.stdout = _Router(_output_saved)
        _output_depth += 1
    _inside.depth = getattr(_inside, "depth", 0) + 1
    try:
        yield
    finally:
        _inside.depth -= 1
        with _output_lock:
            _output_depth -= 1
            if _output_depth == 0:
                sys.stdout = _output_saved
                _output_saved = None


def load_within(seconds: float) -> str | None:
    """Load the plugins, waiting at most ``seconds``: ``None`` once loaded, else the name of
    the plugin still importing (the load goes on in the background, nothing waits on it)."""
    if _state is not None and not _state.waiting:
        return None
    done = threading.Event()

    def load() -> None:
        try:
            _ensure_all(_get_state())
        except Exception:  # noqa: BLE001, S110 - the command that needs plugins says what broke
            pass
        finally:
            done.set()

    threading.Thread(target=load, name="trysquare-plugins", daemon=True).start()
    if done.wait(seconds):
        return None
    return _loading[0] if _loading else "(the plugin manager)"


def _quiet(caller: Callable[..., Any]) -> Callable[..., Any]:
    def call(**kwargs: Any) -> Any:
        with plugin_output():
            return caller(**kwargs)

    return call


def _callers(state: _State, hook_name: str) -> list[tuple[str, Any]]:
    """``(plugin name, a hook caller reaching only that plugin)`` for each implementer.

    Entry-point plugins come first, the in-tree defaults after them. Built with
    pluggy's public ``subset_hook_caller``, so ordering and wrappers stay pluggy's
    (a wrapper sees its own plugin's implementation only).
    """
    if hook_name in state.callers:
        return state.callers[hook_name]
    manager = state.manager
    hook = getattr(manager.hook, hook_name, None)
    callers: list[tuple[str, Any]] = []
    if hook is not None:
        plugins = [(_name(manager, p), p) for p in manager.get_plugins()]
        implementers = {impl.plugin_name for impl in hook.get_hookimpls()}
        for plugin_name in sorted(implementers, key=_order):
            others = [p for name, p in plugins if name != plugin_name]
            callers.append(
                (plugin_name, manager.subset_hook_caller(hook_name, remove_plugins=others))
            )
    state.callers[hook_name] = callers
    return callers


def _fail(state: _State, plugin_name: str, hook_name: str, error: BaseException) -> None:
    """Disable a plugin for the rest of this process: a warning now, ``FAILED`` in ``plugins``."""
    if plugin_name in state.failures:
        return
    state.failures[plugin_name] = f"{hook_name} raised {_describe(error)}"
    print(
        f"trysquare: warning: plugin '{plugin_name}' failed: {state.failures[plugin_name]}",
        file=sys.stderr,
    )


def hook_callers(hook_name: str) -> list[tuple[str, Any]]:
    """``(plugin name, caller)`` for each working plugin implementing ``hook_name``.

    For a caller that handles a plugin's exception itself (a context key a
    plugin cannot compute makes that run unusable, naming the plugin).
    """
    state = _get_state()
    _ensure_hook(state, hook_name)
    return [
        (name, _quiet(caller))
        for name, caller in _callers(state, hook_name)
        if name not in state.failures
    ]


def call_each(
    hook_name: str, /, *, include_failed: bool = False, **kwargs: Any
) -> list[tuple[str, Any]]:
    """Call ``hook_name`` on each plugin on its own; ``(plugin name, answer)`` for those that answered.

    A plugin that raises is reported (a warning, and ``FAILED`` in ``trysquare
    plugins``) and left out of every later hook; the others carry on. With
    ``include_failed``, plugins that failed elsewhere are asked too (a secret a
    broken plugin guards must still be withheld).
    """
    state = _get_state()
    _ensure_hook(state, hook_name)
    answers: list[tuple[str, Any]] = []
    for plugin_name, caller in _callers(state, hook_name):
        if plugin_name in state.failures and not include_failed:
            continue
        try:
            with plugin_output():
                answers.extend((plugin_name, answer) for answer in caller(**kwargs))
        except Exception as error:  # noqa: BLE001 - one plugin's bug is reported, never a crash
            _fail(state, plugin_name, hook_name, error)
    return answers


def _ensure_hook(state: _State, hook_name: str) -> None:
    kind = _declared_kind(hook_name)
    if kind is not None:
        _ensure_kind(state, kind)
    else:
        _ensure(state, lambda provides: f"hook.{hook_name}" in provides)


def protected_env(scenario_file: Path, config: Path | None) -> dict[str, str]:
    """Every variable a plugin guards (a judge provider's key): ``{name: where it is set}``.

    Asked of every plugin declaring ``hook.trysquare_protected_env`` or nothing, of those
    declaring ``hook_with_config.trysquare_protected_env`` when a ``trysquare.toml`` is in
    force (``config``, else the nearest above ``scenario_file``), and of any other loaded
    implementer; every ``protected_env.NAME`` declared is added without importing anyone.
    A plugin asked only because it is loaded that names a key nobody declared is refused
    (the key is still withheld): a command that did not load it would not know that key.
    """
    hook_name = "trysquare_protected_env"
    state = _get_state()
    in_force = config is not None or _config_above(scenario_file)

    def asked(provides: frozenset[str]) -> bool:
        return f"hook.{hook_name}" in provides or (in_force and PROTECTED_WITH_CONFIG in provides)

    _ensure(state, asked)
    declared: dict[str, str] = {}
    for plugin_name, provides in sorted(state.provides.items()):
        for item in sorted(provides or ()):
            if item.startswith(PROTECTED_PREFIX):
                declared.setdefault(item.removeprefix(PROTECTED_PREFIX), plugin_name)
    protected: dict[str, str] = {}
    # Plugins that failed elsewhere are asked too: a key a broken plugin guards stays withheld.
    answers = call_each(hook_name, include_failed=True, scenario_file=scenario_file, config=config)
    for plugin_name, answer in answers:
        names = dict(answer or {})
        for name, where in names.items():
            protected.setdefault(name, where)
        provides = state.provides.get(plugin_name)
        undeclared = sorted(name for name in names if name not in declared)
        if provides is not None and not asked(provides) and undeclared:
            _refuse_plugin(
                state,
                plugin_name,
                f"{hook_name} names {undeclared[0]}, which no plugin declares as "
                f"{PROTECTED_PREFIX}{undeclared[0]} in its '{PROVIDES_GROUP}' entry points",
            )
    for name, plugin_name in declared.items():
        protected.setdefault(name, f"{PROTECTED_PREFIX}{name} of plugin '{plugin_name}'")
    return protected


def _config_above(scenario_file: Path) -> bool:
    """Whether a ``trysquare.toml`` is in the scenario's folder or a folder above it."""
    folder = scenario_file.absolute().parent
    return any((above / CONFIG_FILE).is_file() for above in (folder, *folder.parents))


def _refuse_plugin(state: _State, plugin_name: str, why: str) -> None:
    """Disable a loaded plugin for the rest of this process: a warning, ``FAILED`` in ``plugins``."""
    plugin = state.manager.get_plugin(plugin_name)
    if plugin is not None:
        state.manager.unregister(plugin)
    state.failures.setdefault(plugin_name, why)
    # What it registered is gathered again without it.
    state.registries.clear()
    state.registered_by.clear()
    state.callers.clear()
    _warn_failures(state)


def add_commands(
    subparsers: Any, parser_class: type[argparse.ArgumentParser], *, word: str | None = None
) -> None:
    """Let each plugin add its subcommands; a plugin that raises adds none.

    A plugin describes its commands on parsers of its own
    (:class:`trysquare.api.Commands`); they join the command line only
    once its hook has returned, so a half-registered command never shows. With
    ``word`` (the command the line names), a built-in command loads no plugin for its
    parser, and another loads the plugins declaring it (all of them if none does).
    """
    from trysquare.commands import Commands

    if word is not None and word in subparsers.choices:
        return  # a built-in command: no plugin needs to load for its parser
    state = _get_state()
    if word is None:
        _ensure_kind(state, "command")
    else:
        _ensure_kind(state, "command", [word])
        if f"command.{word}" not in state.declared:
            _ensure_kind(state, "command")  # a command nobody declares: argparse lists them all
    for plugin_name, caller in _callers(state, "trysquare_register_commands"):
        if plugin_name in state.failures:
            continue
        commands = Commands(parser_class)
        try:
            with plugin_output():
                caller(cli=commands)
            commands.attach_to(subparsers)
        except Exception as error:  # noqa: BLE001 - a plugin's bug never takes --help down
            _fail(state, plugin_name, "trysquare_register_commands", error)


def _name(manager: pluggy.PluginManager, plugin: Any) -> str:
    # Every plugin is registered here under a name; pluggy types it as optional.
    name = manager.get_name(plugin)
    assert name is not None
    return name


def _order(plugin_name: str) -> tuple[int, str]:
    # Entry-point plugins first, in-tree defaults after them.
    return (plugin_name in BUILTIN_MODULES, plugin_name)


def modes(names: Iterable[str] | None = None) -> dict[str, Mode]:
    """The registered modes by name: at least those of ``names`` that exist (``None``: all)."""
    return registry("trysquare_register_modes", names)


def session_formats() -> dict[str, SessionFormat]:
    return registry("trysquare_register_session_formats")


def report_formats(names: Iterable[str] | None = None) -> dict[str, Any]:
    """The registered report formats by name (``md``, ``json``, ``csv``, plugins' own):
    at least those of ``names`` that exist (``None``: all)."""
    return registry("trysquare_register_report_formats", names)


def infos(*, fresh: bool = False) -> list[PluginInfo]:
    """Every plugin found: loaded ones with what they provide, broken ones with their error
    (with ``fresh``, found in the installed distributions' metadata, not in the cache)."""
    state = _get_state(fresh=fresh)
    _ensure_all(state)
    listed = listed_registries()
    for hook_name in listed:
        registry(hook_name)
    from trysquare.plugin_info import PluginInfo

    # The columns `trysquare plugins --json` has (its contract): a listed registry names one.
    columns = set(COLUMNS)
    manager = state.manager
    result = []
    names = {_name(manager, p) for p in manager.get_plugins()} | set(state.failures)
    for name in sorted(names, key=_order):
        plugin = manager.get_plugin(name)
        hooks = tuple(
            sorted(
                impl_hook.name
                for impl_hook in (
                    (manager.get_hookcallers(plugin) or []) if plugin is not None else []
                )
            )
        )
        provided = {
            column: tuple(sorted(state.registered_by.get(hook, {}).get(name, [])))
            for hook, (column, _) in listed.items()
            if column in columns
        }
        result.append(
            PluginInfo(
                name=name,
                version=state.versions.get(name) or _builtin_version(name),
                hooks=hooks,
                error=state.failures.get(name),
                refused=tuple(state.refusals.get(name, ())),
                **provided,
            )
        )
    return result


def _builtin_version(name: str) -> str | None:
    if name in BUILTIN_MODULES:
        from trysquare._version import __version__

        return __version__
    return None


def warn(message: str) -> None:
    from trysquare._shown import shown  # an observer's error may quote a run's data

    print(f"trysquare: warning: {shown(message)}", file=sys.stderr)


def observe_outcome(run: Any, validation: Any, outcome: Any) -> None:
    """Hand a recorded outcome to each ``trysquare_metrics_collected`` observer on its own.

    An observer that raises is a warning naming its plugin; the result stays
    recorded and the other observers are still told. An observer is not
    disabled for one failure (a tracker's network may come back).
    """
    for plugin_name, caller in hook_callers("trysquare_metrics_collected"):
        try:
            caller(run=run, validation=validation, outcome=outcome)
        except Exception as error:  # noqa: BLE001 - an observer never loses a recorded result
            warn(
                f"plugin '{plugin_name}': an observer of trysquare_metrics_collected failed: "
                f"{type(error).__name__}: {error}"
            )
