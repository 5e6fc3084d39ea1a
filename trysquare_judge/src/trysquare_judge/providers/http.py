"""What every HTTP judge provider shares: one client per endpoint, its concurrency
bound, retries with backoff that honours ``Retry-After``, and a transcript with no
secret in it.

A provider describes its wire format (the body it sends, how it reads a reply);
:class:`HttpEndpoint` carries the request. 408, 429, every 5xx, a lost connection
and a timeout are retried; every other refusal is final. At most
``max_concurrency`` requests are in flight per configuration, whatever the number
of runs or threads. Imported only when a provider connects (httpx is not cheap).
"""

from __future__ import annotations

import email.utils
import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import httpcore  # noqa: F401 - httpx imports it on the first client; paid here, when a provider connects
import httpx

from trysquare_judge.providers import ChatReply, ProviderConfig, ProviderError, Usage
from trysquare_judge.scrub import scrub as scrub_text
from trysquare_judge.scrub import scrub_value

__all__ = ["HttpEndpoint", "scrub", "snippet"]

RETRIED_STATUSES = frozenset({408, 429})
MAX_BACKOFF = 60.0  # seconds: no single wait is longer, Retry-After included
SNIPPET = 500  # characters of an error body kept in a message

# Turns a 200 response into a reply (raising ProviderError when it cannot be read).
ReadReply = Callable[[httpx.Response, tuple[Mapping[str, Any], ...]], ChatReply]


class HttpEndpoint:
    """One endpoint: a shared httpx client and the semaphore that bounds it."""

    def __init__(
        self, config: ProviderConfig, url: str, *, recorded_headers: Mapping[str, str] | None = None
    ) -> None:
        self.config = config
        self.url = url
        # Response headers kept in the transcript, by the name they are kept under.
        self.recorded_headers = {"retry-after": "retry_after", **(recorded_headers or {})}
        self.slots = threading.BoundedSemaphore(config.max_concurrency)
        limits = httpx.Limits(
            max_connections=config.max_concurrency, max_keepalive_connections=config.max_concurrency
        )
        # A plain-http endpoint (a local server) needs no certificate store; redirects are
        # never followed, so nothing can carry the key to another address.
        self.client = httpx.Client(
            timeout=config.timeout, limits=limits, verify=not url.startswith("http://")
        )

    def post(
        self, body: Mapping[str, Any], headers: Mapping[str, str], key: str | None, read: ReadReply
    ) -> ChatReply:
        """Send ``body`` until a reply comes, retrying what may pass on a second try.

        The reply's (or the error's) usage counts every attempt as a request:
        a retried request, and one that failed before any answer, was sent all
        the same. Tokens are those ``read`` found in the answer.
        """
        exchanges: list[dict[str, Any]] = []
        attempts = self.config.max_retries + 1
        for attempt in range(1, attempts + 1):
            exchange: dict[str, Any] = {"attempt": attempt, "request": {"url": self.url, "body": body}}
            exchanges.append(exchange)
            started = time.monotonic()
            wait: float | None = None
            try:
                with self.slots:  # held only while a request is in flight, not while backing off
                    response = self.client.post(self.url, json=body, headers=dict(headers))
            except httpx.TimeoutException:
                exchange["error"] = f"no reply within {self.config.timeout:g} s"
            except httpx.TransportError as error:
                exchange["error"] = scrub(f"connection failed: {type(error).__name__}: {error}", key)
            else:
                exchange["response"] = self._recorded(response, key)
                if response.status_code == 200:
                    exchange["duration"] = round(time.monotonic() - started, 6)
                    try:
                        reply = read(response, tuple(exchanges))
                    except ProviderError as unreadable:
                        unreadable.usage = Usage(requests=attempt)
                        raise
                    return attrs.evolve(reply, usage=attrs.evolve(reply.usage or Usage(), requests=attempt))
                if response.status_code not in RETRIED_STATUSES and response.status_code < 500:
                    raise ProviderError(
                        f"HTTP {response.status_code} from {self.url}: {snippet(response, key)}",
                        tuple(exchanges),
                        Usage(requests=attempt),
                    )
                exchange["error"] = f"HTTP {response.status_code}"
                wait = _retry_after(response)
            exchange["duration"] = round(time.monotonic() - started, 6)
            if attempt == attempts:
                break
            # Exponential backoff with a little jitter, so bounded runs do not retry in lockstep;
            # the server's Retry-After wins when it asks for longer.
            backoff = self.config.retry_backoff * (2 ** (attempt - 1)) * (1 + random.random() / 10)
            time.sleep(min(max(backoff, wait or 0.0), MAX_BACKOFF))
        last = exchanges[-1].get("error", "failed")
        raise ProviderError(
            f"{last} from {self.url} (gave up after {attempts} attempt{'s' if attempts > 1 else ''})",
            tuple(exchanges),
            Usage(requests=attempts),
        )

    def _recorded(self, response: httpx.Response, key: str | None) -> dict[str, Any]:
        try:
            body: Any = response.json()
        except ValueError:
            body = scrub(response.text, key)
        else:
            # String by string: a key holding `"` or `\` is escaped in JSON text.
            body = scrub_value(body, [key])
        recorded: dict[str, Any] = {"status": response.status_code, "body": body}
        for header, field in self.recorded_headers.items():
            if header in response.headers:
                recorded[field] = response.headers[header]
        return recorded


def _retry_after(response: httpx.Response) -> float | None:
    """``Retry-After`` in seconds (a number or an HTTP date), or ``None``."""
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


def snippet(response: httpx.Response, key: str | None) -> str:
    """The start of an error body, for a message (scrubbed of the key)."""
    # Scrubbed before it is cut, so no half of a key survives at the cut.
    text = scrub(" ".join(response.text.split()), key)
    return text[:SNIPPET] + ("..." if len(text) > SNIPPET else "") or "(empty body)"


def scrub(text: str, key: str | None) -> str:
    """``text`` without the key in any encoding (see :mod:`trysquare_judge.scrub`)."""
    # A server that echoes the request headers must not put the key in a file.
    return scrub_text(text, [key])
