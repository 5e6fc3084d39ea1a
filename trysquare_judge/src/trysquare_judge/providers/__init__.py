"""Judge providers: what a provider plugin implements, and ``trysquare.toml``.

A *provider type* (``type = "openai"``) is registered through
``trysquare_register_judge_providers``. A ``[providers.NAME]`` section of
``trysquare.toml`` configures one endpoint of a type; a scenario's ``provider``
names that section or, with no such section, a registered type used with its
defaults.
A type may declare options of its own (an API version, a region, a deployment
name): an attrs class as its ``options`` attribute, whose fields are the keys of
``[providers.NAME.options]``, structured as strictly as the section itself.

The judge mode drives the conversation (the verdict tool, its validation, the
corrections); a provider only carries one request to its server and brings the
reply back, in the neutral records below, plus the wire exchanges for the
transcript (never a secret in them).
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, Protocol

import attrs
from trysquare import api
from trysquare.api import ConfigError, ScenarioError

__all__ = [
    "CONFIG_FILE",
    "DEFAULT_MAX_REPLY_BYTES",
    "ChatReply",
    "ChatRequest",
    "Connection",
    "Message",
    "Provider",
    "ProviderConfig",
    "ProviderError",
    "ReplyTooLarge",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "api_key",
    "connection_for",
    "find_config",
    "load_config",
    "protected_keys",
    "provider_types",
    "resolve_provider",
    "token_count",
]

CONFIG_FILE = "trysquare.toml"
# The most bytes of one reply (decoded) a provider reads: a verdict with its reasons is a few
# kilobytes; an endpoint that sends more is never read whole, stored or judged.
DEFAULT_MAX_REPLY_BYTES = 1024 * 1024
HOOK = "trysquare_register_judge_providers"
DEFAULT_POLL_INTERVAL = 30.0  # seconds: a batch takes minutes to hours
DEFAULT_BATCH_DISCOUNT = 0.5  # OpenAI's and Anthropic's batch APIs charge half
Thinking = Literal["off", "low", "medium", "high"]
THINKING: tuple[str, ...] = ("off", "low", "medium", "high")
TOOL_CHOICES: tuple[str, ...] = ("named", "required", "auto")


@attrs.frozen(kw_only=True)
class Usage:
    """What a provider reported spending: requests sent, and the tokens it counted.

    ``requests`` counts every request sent, retries and requests that failed
    before any answer included (each may be billed, and each counts against a
    rate limit). A token count is ``None`` when the provider reported none:
    unknown is not zero. ``input_tokens`` is every input token billed, those
    served from a prompt cache included; ``cached_tokens`` is that cached part.
    """

    requests: int = 0
    """Requests sent: every attempt, retries and failed attempts included."""
    input_tokens: int | None = None
    """Input tokens billed, those served from a prompt cache included; ``None``: not reported."""
    output_tokens: int | None = None
    """Output tokens billed (reasoning included); ``None``: not reported."""
    cached_tokens: int | None = None
    """The part of ``input_tokens`` served from a prompt cache; ``None``: not reported."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            requests=self.requests + other.requests,
            input_tokens=_plus(self.input_tokens, other.input_tokens),
            output_tokens=_plus(self.output_tokens, other.output_tokens),
            cached_tokens=_plus(self.cached_tokens, other.cached_tokens),
        )


def _plus(first: int | None, second: int | None) -> int | None:
    # Unknown plus a count is the count; unknown plus unknown stays unknown.
    if first is None:
        return second
    if second is None:
        return first
    return first + second


def token_count(value: Any) -> int | None:
    """A token count read from a provider's reply: a non-negative whole number, else ``None``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


class ProviderError(Exception):
    """A provider gave up on a request (retries spent, timeout, refusal): the run is invalid."""

    def __init__(
        self,
        message: str,
        exchanges: tuple[Mapping[str, Any], ...] = (),
        usage: Usage | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        """The sentence the run's result records as its error."""
        self.exchanges = exchanges
        """What was sent and received before giving up, for the transcript."""
        self.usage = usage
        """What was spent before giving up (``None``: the provider did not say; the judge then
        counts one request per exchange)."""


class ReplyTooLarge(ProviderError):
    """A reply longer than the section's ``max_reply_bytes``: not read further, not stored;
    the judge result is unjudged with the size in the reason (a verdict nobody could read
    whole is no verdict, and the run is not at fault)."""


@attrs.frozen(kw_only=True)
class ProviderConfig:
    """One ``[providers.NAME]`` section (or a registered type's defaults).

    Hashable on purpose: one connection, and so one concurrency bound, exists
    per distinct configuration in a process, shared by every run it judges.
    """

    name: str
    """The section's name (``[providers.NAME]``), or the type's when a scenario names it bare."""
    type: str
    """The provider type (``type = "..."``): which registered :class:`Provider` connects."""
    base_url: str | None = None
    """The endpoint's address (``http://`` or ``https://``); ``None``: the type's own default."""
    api_key_env: str | None = None
    """The *name* of the environment variable holding the key (read with :func:`api_key` when
    a request is sent); the key itself is never stored. ``None``: no key."""
    max_concurrency: int = 8
    """Requests in flight at once through this configuration, across every run."""
    timeout: float = 120.0
    """Seconds for each attempt's whole exchange: connecting, sending, the reply's last byte."""
    max_retries: int = 4
    """Attempts after the first, on 408 / 429 / 5xx, a lost connection or a timeout."""
    retry_backoff: float = 1.0
    """The first wait between attempts, in seconds, doubled each retry (``Retry-After`` wins)."""
    tool_choice: str = "named"
    """``named``: force the ``verdict`` tool; ``required``: force some tool; ``auto``: none."""
    price_input: float | None = None
    """US dollars per million input tokens; ``None``: no price declared (never read as free)."""
    price_output: float | None = None
    """US dollars per million output tokens; ``None``: no price declared."""
    max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES
    """The most bytes of one reply's body (decoded) read; more raises :class:`ReplyTooLarge`."""
    poll_interval: float = DEFAULT_POLL_INTERVAL
    """Batch judging: seconds before the second look at a batch in flight; each later wait
    is half again as long, up to ten minutes (or this, when longer)."""
    batch_discount: float = DEFAULT_BATCH_DISCOUNT
    """Batch judging: the fraction of ``price_input`` / ``price_output`` a batch verdict's
    tokens cost (the providers' batch APIs charge half)."""
    source: str = ""
    """Where it was read (``trysquare.toml [providers.NAME]``), for messages; not identity."""
    options: Any = None
    """The type's own options: an instance of its :attr:`Provider.options` class, built from
    ``[providers.NAME.options]`` (its defaults when the table is absent); ``None`` for a type
    that declares none."""

    def identity(self) -> dict[str, Any]:
        """What decides which judge answers: part of the validator's digest.

        Options count once they differ from the type's defaults (an API version or a
        deployment may change the answer); left at their defaults, they change nothing.
        """
        identity: dict[str, Any] = {"name": self.name, "type": self.type, "base_url": self.base_url}
        if self.options is not None and attrs.has(type(self.options)):
            given = attrs.asdict(self.options)
            try:
                defaults = attrs.asdict(type(self.options)())
            except TypeError:  # a field without a default: every value is a choice
                defaults = {}
            changed = {
                key: value
                for key, value in given.items()
                if key not in defaults or defaults[key] != value
            }
            if changed:
                identity["options"] = changed
        return identity


@attrs.frozen
class ToolCall:
    """One tool call in a reply: its id, the tool's name and its arguments as JSON text."""

    id: str
    """The call's id, which a ``tool`` :class:`Message` answering it names."""
    name: str
    """The tool called (``verdict`` for the judge's)."""
    arguments: str
    """The arguments as JSON text, exactly as the model wrote them (the judge parses them)."""


@attrs.frozen(kw_only=True)
class Message:
    """One neutral conversation message; a provider translates it to its wire format."""

    role: Literal["user", "assistant", "tool"]
    """Who speaks: the judge (``user``), the model (``assistant``) or a tool's answer (``tool``)."""
    content: str = ""
    """The message's text."""
    tool_calls: tuple[ToolCall, ...] = ()
    """``assistant`` only: the calls the model made in that turn, sent back as it made them."""
    tool_call_id: str | None = None
    """``tool`` only: the id of the :class:`ToolCall` this message answers."""


@attrs.frozen
class ToolSpec:
    """The tool a request offers (the judge's ``verdict``): its JSON schema in ``parameters``."""

    name: str
    """The tool's name (``verdict``)."""
    description: str
    """What the tool is for, as the model reads it."""
    parameters: Mapping[str, Any]
    """The JSON Schema of the tool's arguments."""


@attrs.frozen(kw_only=True)
class ChatRequest:
    """One request of the judge: the model, the thinking level, the system prompt (the
    rubric), the conversation so far in neutral :class:`Message` records, and the tool
    the reply must call."""

    model: str
    """The judge's model, as the scenario names it (``model = "..."``)."""
    thinking: str
    """``off``, ``low``, ``medium`` or ``high``; ``off`` asks for no reasoning. Each provider
    maps it to its API (a reasoning effort, a thinking budget)."""
    system: str
    """The system prompt: the judge's instructions and the rubric."""
    messages: tuple[Message, ...]
    """The conversation so far, oldest first: the material, then any correction turns."""
    tool: ToolSpec
    """The tool the reply must call (``config.tool_choice`` says how hard to force it)."""


@attrs.frozen(kw_only=True)
class ChatReply:
    """The model's answer: text, tool calls, or both; ``exchanges`` go to the transcript."""

    content: str = ""
    """The reply's text (prose beside or instead of a tool call)."""
    tool_calls: tuple[ToolCall, ...] = ()
    """The tool calls the reply made, in order."""
    exchanges: tuple[Mapping[str, Any], ...] = ()
    """Every request sent and response received for this reply, retries included, for the
    transcript (never a key in them). A provider must pass them in: the transcript is
    built from them. :class:`~trysquare_judge.providers.http.HttpEndpoint` hands them to
    its ``read`` callback."""
    usage: Usage | None = None
    """What this reply cost, retries included; ``None``: the provider did not say (the judge
    then counts one request per exchange, tokens unknown)."""


class Connection(Protocol):
    """A client for one configured endpoint; used from many threads at once."""

    def complete(self, request: ChatRequest) -> ChatReply:
        """Send one non-streamed request forcing ``request.tool``; return the reply.

        Retries what is worth retrying, within the configuration's bound on
        concurrent requests. Raises :class:`ProviderError` when it gives up, its
        ``exchanges`` holding what was sent and received. Never puts a key in a
        reply, an exchange or an error. Holds ``config.timeout`` as a deadline for each
        attempt's whole exchange, gives up as soon as
        :func:`trysquare.api.interrupted` is true, and raises
        :class:`ReplyTooLarge` for a reply over ``config.max_reply_bytes`` without
        keeping it (:class:`trysquare_judge.providers.http.HttpEndpoint` does all three).
        """
        ...


class Provider(Protocol):
    """A provider type, registered through ``trysquare_register_judge_providers``.

    ``name`` is what ``type = "..."`` names. ``defaults()`` are the section's
    keys used when a scenario names the type with no ``[providers.NAME]``
    section (e.g. ``{"base_url": "https://api.openai.com/v1", "api_key_env":
    "OPENAI_API_KEY"}``). ``connect(config)`` returns a :class:`Connection`.
    """

    name: str

    def defaults(self) -> Mapping[str, Any]: ...

    def connect(self, config: ProviderConfig) -> Connection: ...


@attrs.frozen(kw_only=True)
class _Section:
    """The keys a ``[providers.NAME]`` section may hold, structured strictly."""

    type: str
    base_url: str | None = None
    api_key_env: str | None = None
    max_concurrency: int = 8
    timeout: float = 120.0
    max_retries: int = 4
    retry_backoff: float = 1.0
    tool_choice: str = "named"
    price_input: float | None = None
    price_output: float | None = None
    max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES
    poll_interval: float = DEFAULT_POLL_INTERVAL
    batch_discount: float = DEFAULT_BATCH_DISCOUNT
    options: dict[str, Any] | None = None


@attrs.frozen
class _ConfigFile:
    providers: dict[str, dict[str, Any]] = attrs.field(factory=dict)


def provider_types() -> dict[str, Provider]:
    return api.registry(HOOK)


def find_config(start: Path) -> Path | None:
    """The nearest ``trysquare.toml`` in ``start`` or a folder above it."""
    start = start.absolute()
    for folder in (start, *start.parents):
        candidate = folder / CONFIG_FILE
        if candidate.is_file():
            return candidate
    return None


def load_config(path: Path) -> dict[str, ProviderConfig]:
    """Every ``[providers.NAME]`` of ``path``, strictly: a refusal names the file and the key."""
    data = api.read_toml(path, error=ConfigError)
    try:
        raw = api.structure(data, _ConfigFile, file=path)
        configs = {}
        types: dict[str, Provider] | None = None
        for name, table in raw.providers.items():
            if not isinstance(table, dict):
                raise ConfigError(f"{path.name}: providers.{name}: must be a table")
            if not isinstance(table.get("options", {}), dict):
                raise ConfigError(
                    f"{path.name}: providers.{name}.options: must be a table "
                    f"([providers.{name}.options])"
                )
            section = api.structure(table, _Section, file=path, path=f"providers.{name}")
            if types is None:
                types = provider_types()
            options = _options(types.get(section.type), section, path, f"providers.{name}")
            configs[name] = _checked(name, section, path.name, f"providers.{name}", options)
    except ScenarioError as error:
        # The converter speaks of scenarios; this is the configuration.
        raise ConfigError(error.message) from None
    return configs


def _options(provider: Provider | None, section: _Section, file: Path, where: str) -> Any:
    """The section's ``options`` table structured into the type's options record.

    A type no plugin provides keeps ``None`` (using the section is refused later, naming the
    missing type); a type that declares no options refuses a table.
    """
    if provider is None:
        return None
    kind = getattr(provider, "options", None)
    if kind is None:
        if section.options is not None:
            raise ConfigError(
                f"{file.name}: {where}.options: provider type '{section.type}' takes no options"
            )
        return None
    if not (isinstance(kind, type) and attrs.has(kind)):
        raise ConfigError(
            f"{file.name}: {where}.options: provider type '{section.type}' declares options "
            f"that are not an attrs class ({kind!r}); the plugin is broken"
        )
    record = api.structure(section.options or {}, kind, file=file, path=f"{where}.options")
    try:
        hash(record)
    except TypeError:
        raise ConfigError(
            f"{file.name}: {where}.options: provider type '{section.type}' declares options "
            f"that cannot be hashed (make {kind.__name__} @attrs.frozen with hashable fields, "
            "tuples not lists); the plugin is broken"
        ) from None
    return record


def _checked(
    name: str, section: _Section, file: str, where: str, options: Any = None
) -> ProviderConfig:
    def refuse(key: str, message: str) -> ConfigError:
        return ConfigError(f"{file}: {where}.{key}: {message}")

    if section.max_concurrency < 1:
        raise refuse("max_concurrency", "must be at least 1")
    if not math.isfinite(section.timeout) or section.timeout <= 0:  # TOML has nan and inf
        raise refuse("timeout", "must be a finite positive number of seconds")
    if section.max_retries < 0:
        raise refuse("max_retries", "must be 0 or more")
    if section.retry_backoff < 0:
        raise refuse("retry_backoff", "must be 0 or more seconds")
    if section.max_reply_bytes < 1:
        raise refuse("max_reply_bytes", "must be a positive number of bytes")
    if not math.isfinite(section.poll_interval) or section.poll_interval < 0:
        raise refuse("poll_interval", "must be a finite number of seconds, 0 or more")
    if not math.isfinite(section.batch_discount) or not 0 <= section.batch_discount <= 1:
        raise refuse("batch_discount", "must be a fraction of the price, between 0 and 1")
    if section.tool_choice not in TOOL_CHOICES:
        raise refuse(
            "tool_choice", f"must be one of {', '.join(TOOL_CHOICES)}, not '{section.tool_choice}'"
        )
    if section.api_key_env is not None and not section.api_key_env.strip():
        raise refuse(
            "api_key_env", "is empty; name the variable that holds the key, or remove the key"
        )
    for key in ("price_input", "price_output"):
        price = getattr(section, key)
        if price is not None and (not math.isfinite(price) or price < 0):
            raise refuse(
                key,
                f"must be a non-negative number of US dollars per million tokens, not {price!r}",
            )
    if section.base_url is not None and not section.base_url.startswith(("http://", "https://")):
        raise refuse("base_url", f"'{section.base_url}' is not an http:// or https:// address")
    values = attrs.asdict(section)
    values["options"] = options
    return ProviderConfig(name=name, source=f"{file} [{where}]", **values)


def resolve_provider(
    name: str,
    scenario_file: Path,
    refuse: Callable[[str, str], Exception],
    config_file: Path | None = None,
) -> ProviderConfig:
    """What a scenario's ``provider = NAME`` means: a config section, else a registered type.

    ``config_file`` is the file named by ``--config``; without it, the nearest
    ``trysquare.toml`` walking up from the scenario.
    """
    config_path = config_file or find_config(scenario_file.parent)
    types = provider_types()
    if config_path is not None:
        sections = load_config(config_path)
        if name in sections:
            config = sections[name]
            if config.type not in types:
                known = ", ".join(sorted(types)) or "none"
                raise ConfigError(
                    f"{config_path.name}: providers.{name}.type: no installed plugin provides "
                    f"provider type '{config.type}' (installed: {known})"
                )
            return config
    if name in types:
        # A registered type named bare: its own defaults, as if it were a section.
        table = {"type": name, **types[name].defaults()}
        label = Path(f"provider type '{name}'")
        try:
            section = api.structure(table, _Section, file=label)
            options = _options(types[name], section, label, "defaults")
        except ScenarioError as error:
            raise ConfigError(error.message) from None
        return _checked(name, section, f"provider type '{name}'", "defaults", options)
    looked = (
        f"no [providers.{name}] in {config_path}"
        if config_path
        else f"no {CONFIG_FILE} above the scenario"
    )
    known = ", ".join(sorted(types)) or "none"
    raise refuse(
        "provider",
        f"'{name}' is neither a provider section ({looked}) nor an installed provider type "
        f"(installed: {known})",
    )


def protected_keys(scenario_file: Path, config_file: Path | None = None) -> dict[str, str]:
    """``{variable: where}`` for every key a judge could read: each ``[providers.NAME]``
    of the ``trysquare.toml`` in force (used by the scenario or not) and each
    installed provider type's default ``api_key_env``."""
    keys: dict[str, str] = {}
    config_path = config_file or find_config(scenario_file.parent)
    if config_path is not None:
        for name, section in load_config(config_path).items():
            if section.api_key_env:
                keys.setdefault(
                    section.api_key_env, f"{config_path} [providers.{name}].api_key_env"
                )
    for name, provider in sorted(provider_types().items()):
        try:
            variable = provider.defaults().get("api_key_env")
        except Exception:  # noqa: BLE001, S112 - a broken provider plugin names no key; it fails where used
            continue
        if isinstance(variable, str) and variable:
            keys.setdefault(variable, f"the default api_key_env of provider type '{name}'")
    return keys


def api_key(config: ProviderConfig) -> str | None:
    """The key, read from the environment at the moment it is needed, never kept.

    ``None`` when the configuration names no variable. A judge whose ``api_key_env``
    variable is unset is refused at load, so a provider's tests set it (any value, for a
    local server) or leave ``api_key_env`` out of the section.
    """
    if config.api_key_env is None:
        return None
    return os.environ.get(config.api_key_env)


_connections: dict[ProviderConfig, Connection] = {}
_lock = threading.Lock()


def connection_for(config: ProviderConfig) -> Connection:
    """The process's one connection for ``config``: its concurrency bound is shared by all runs."""
    with _lock:
        connection = _connections.get(config)
        if connection is None:
            provider = provider_types().get(config.type)
            if provider is None:
                raise ProviderError(f"no installed plugin provides provider type '{config.type}'")
            connection = provider.connect(config)
            _connections[config] = connection
        return connection
