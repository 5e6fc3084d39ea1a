"""The environment a validator or the suite is handed: trysquare's, minus the secrets.

Script validators and the suite run code that is not trysquare's to trust (a
validator may print what it sees; the suite runs the measured agent's test
code), so neither gets a judge provider's key nor any variable whose name
looks like a credential — unless the scenario passes it by name (``pass_env``).
Dependency-free: ``trysquare.assay`` reaches it through ``run.tests()``.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Mapping
from typing import Any

from trysquare._lazy_pattern import LazyPattern

__all__ = ["SECRET_PATTERNS", "child_environment", "is_env_name", "looks_secret", "withheld_names"]

# A name containing one of these (case-insensitive) looks like a credential.
SECRET_WORDS: tuple[str, ...] = (
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "CREDENTIAL",
    "AUTH",  # GITHUB_AUTH, SSH_AUTH_SOCK (a live ssh agent is a credential too); not AUTHOR
    "COOKIE",
    "SESSION_ID",
)
# Cloud providers' credential families, matched by prefix (case-insensitive).
SECRET_PREFIXES: tuple[str, ...] = (
    "AWS_",
    "AZURE_",
    "ARM_",  # Terraform's Azure credentials
    "GOOGLE_APPLICATION_CREDENTIALS",
    "GOOGLE_CLOUD_",
    "GCLOUD_",
    "CLOUDSDK_",
    "DIGITALOCEAN_",
    "OCI_",  # Oracle cloud
)
# What the docs print: the rule in one line.
SECRET_PATTERNS: tuple[str, ...] = tuple(f"*{w}*" for w in SECRET_WORDS) + tuple(
    f"{p}*" for p in SECRET_PREFIXES
)

_NAME = LazyPattern(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def is_env_name(name: object) -> bool:
    """Whether ``name`` is a plain environment variable name (letters, digits, ``_``)."""
    return isinstance(name, str) and bool(_NAME.match(name))


# Pure in the name, and asked for every variable before every validator starts.
@functools.lru_cache(maxsize=4096)
def looks_secret(name: str) -> bool:
    """Whether a variable named ``name`` is withheld unless passed by name.

    >>> looks_secret("ILAAS_API_KEY"), looks_secret("AWS_REGION"), looks_secret("PATH")
    (True, True, False)
    """
    upper = name.upper().replace("AUTHOR", "")  # GIT_AUTHOR_NAME names a person, not a key
    return any(word in upper for word in SECRET_WORDS) or upper.startswith(SECRET_PREFIXES)


def withheld_names(
    environ: Mapping[str, str], *, passed: Iterable[str] = (), protected: Iterable[str] = ()
) -> list[str]:
    """The names of ``environ`` a child does not get, sorted."""
    return sorted(_withheld(environ, passed, protected))


def _withheld(environ: Iterable[str], passed: Iterable[str], protected: Iterable[str]) -> set[str]:
    blocked = set(protected)
    allowed = set(passed) - blocked
    return {
        name for name in environ if name in blocked or (name not in allowed and looks_secret(name))
    }


def child_environment(
    *,
    passed: Iterable[str] = (),
    protected: Iterable[str] = (),
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """``environ`` (default: this process's) minus what a validator or the suite must not see.

    ``protected`` names (every configured judge provider's ``api_key_env``) are
    always removed; names that look secret (:data:`SECRET_PATTERNS`) are removed
    unless listed in ``passed``.
    """
    if environ is None:
        # Asked once per task: decoding and screening this process's whole environment each
        # time cost more than the rest of starting a warm validator. Kept per environment as
        # it is now (its raw bytes) and per names passed and protected; a copy is handed out.
        key = (tuple(os.environ._data.items()), tuple(passed), tuple(protected))  # type: ignore[attr-defined]
        found = _SCREENED.get(key)
        if found is None:
            if len(_SCREENED) > 8:
                _SCREENED.clear()
            found = _SCREENED[key] = _screened(dict(os.environ), key[1], key[2])
        return dict(found)
    return _screened(dict(environ), passed, protected)


_SCREENED: dict[tuple[Any, ...], dict[str, str]] = {}


def _screened(
    source: dict[str, str], passed: Iterable[str], protected: Iterable[str]
) -> dict[str, str]:
    dropped = _withheld(source, passed, protected)
    if not dropped:
        return source
    return {name: value for name, value in source.items() if name not in dropped}
