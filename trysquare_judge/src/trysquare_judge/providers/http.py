"""What every HTTP judge provider shares: one client per endpoint, its concurrency
bound, retries with backoff that honours ``Retry-After``, and a transcript with no
secret in it.

A provider describes its wire format (the body it sends, how it reads a reply);
:class:`HttpEndpoint` carries the request. 408, 429, every 5xx, a lost connection
and a timeout are retried; every other refusal is final. At most
``max_concurrency`` requests are in flight per configuration, whatever the number
of runs or threads. Imported only when a provider connects (httpx is not cheap).

The section's ``timeout`` is a deadline for each attempt's whole exchange, the reply's
last byte included (httpx's own timeouts are per read: a server sending a byte every
few tenths of a second would hold a request for ever), and an interrupted ``validate``
(:func:`trysquare.api.interrupted`) gives up on every request in flight within a
fraction of a second. The exchange runs in a daemon thread the caller waits on, so the
caller leaves at the deadline whatever the socket does; a trickling reply is dropped at
its next byte, a silent one when httpx's per-read timeout ends it. A reply is read up
to ``max_reply_bytes`` (decoded): one longer is dropped unread (:class:`ReplyTooLarge`),
and nothing of it is kept.
"""

from __future__ import annotations

import email.utils
import random
import socket
import threading
import time
import zlib
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import httpcore  # noqa: F401 - httpx imports it on the first client; paid here, when a provider connects
import httpx
from trysquare.api import interrupted

from trysquare_judge.providers import ChatReply, ProviderConfig, ProviderError, ReplyTooLarge, Usage
from trysquare_judge.scrub import scrub as scrub_text
from trysquare_judge.scrub import scrub_value

__all__ = ["HttpEndpoint", "scrub", "snippet"]

RETRIED_STATUSES = frozenset({408, 429})
MAX_BACKOFF = 60.0  # seconds: no single wait is longer, Retry-After included
SNIPPET = 500  # characters of an error body kept in a message
POLL = 0.1  # seconds between two looks at the deadline and at an interruption
# Headers that describe the bytes on the wire, not the body as read (already decoded).
_WIRE_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding"})

# Turns a 200 response into a reply (raising ProviderError when it cannot be read).
ReadReply = Callable[[httpx.Response, tuple[Mapping[str, Any], ...]], ChatReply]


class HttpEndpoint:
    """One endpoint: a shared httpx client and the semaphore that bounds it.

    What a provider over HTTP builds in its connection's ``__init__``
    (``HttpEndpoint(config, url)``) and calls from ``complete``: :meth:`post` holds
    ``config.max_concurrency``, ``config.timeout``, the retries with their backoff,
    ``config.max_reply_bytes`` and interruption, and records the exchanges scrubbed of the
    key. ``recorded_headers`` names response headers to keep in the transcript
    (``{"request-id": "request_id"}``).
    """

    def __init__(
        self, config: ProviderConfig, url: str, *, recorded_headers: Mapping[str, str] | None = None
    ) -> None:
        self.config = config
        self.url = url
        # Response headers kept in the transcript, by the name they are kept under.
        self.recorded_headers = {"retry-after": "retry_after", **(recorded_headers or {})}
        self.slots = threading.BoundedSemaphore(config.max_concurrency)
        # The semaphore bounds the requests in flight. The pool itself is not bounded: an
        # exchange given up at its deadline may hold its connection a little longer (until
        # its thread notices), and the next attempt must not wait for it.
        limits = httpx.Limits(
            max_connections=None, max_keepalive_connections=config.max_concurrency
        )
        # A plain-http endpoint (a local server) needs no certificate store; redirects are
        # never followed, so nothing can carry the key to another address.
        # Only the encodings the reply reader below undoes within the cap are asked for.
        self.client = httpx.Client(
            timeout=config.timeout,
            limits=limits,
            verify=not url.startswith("http://"),
            headers={"Accept-Encoding": "gzip, deflate"},
        )

    def post(
        self, body: Mapping[str, Any], headers: Mapping[str, str], key: str | None, read: ReadReply
    ) -> ChatReply:
        """Send ``body`` until a reply comes, retrying what may pass on a second try.

        :param body: the JSON body, as the transcript records it.
        :param headers: the request's headers, the key's included (never recorded).
        :param key: the key (from :func:`trysquare_judge.providers.api_key`), scrubbed from
            everything recorded or raised.
        :param read: ``read(response, exchanges) -> ChatReply`` for a 200 response; it
            must pass ``exchanges`` into the :class:`ChatReply` (the transcript is built
            from them) and may raise :class:`ProviderError` for an unreadable reply.
        :raises ProviderError: when it gives up (``ReplyTooLarge`` for a reply over the cap).

        The reply's (or the error's) usage counts every attempt as a request:
        a retried request, and one that failed before any answer, was sent all
        the same. Tokens are those ``read`` found in the answer.
        """
        exchanges: list[dict[str, Any]] = []
        attempts = self.config.max_retries + 1
        for attempt in range(1, attempts + 1):
            exchange: dict[str, Any] = {
                "attempt": attempt,
                "request": {"url": self.url, "body": body},
            }
            exchanges.append(exchange)
            started = time.monotonic()
            wait: float | None = None
            try:
                self._take_slot(exchanges, attempt)
                try:  # held only while a request is in flight, not while backing off
                    response = self._exchange(body, headers, exchanges, attempt)
                finally:
                    self.slots.release()
            except httpx.TimeoutException:
                exchange["error"] = (
                    f"no reply within {self.config.timeout:g} s (the whole exchange, body included)"
                )
            except httpx.TransportError as error:
                exchange["error"] = scrub(
                    f"connection failed: {type(error).__name__}: {error}", key
                )
            else:
                exchange["response"] = self._recorded(response, key)
                if response.status_code == 200:
                    exchange["duration"] = round(time.monotonic() - started, 6)
                    try:
                        reply = read(response, tuple(exchanges))
                    except ProviderError as unreadable:
                        unreadable.usage = Usage(requests=attempt)
                        raise
                    return attrs.evolve(
                        reply, usage=attrs.evolve(reply.usage or Usage(), requests=attempt)
                    )
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
            self._pause(min(max(backoff, wait or 0.0), MAX_BACKOFF), exchanges, attempt)
        last = exchanges[-1].get("error", "failed")
        raise ProviderError(
            f"{last} from {self.url} (gave up after {attempts} attempt{'s' if attempts > 1 else ''})",
            tuple(exchanges),
            Usage(requests=attempts),
        )

    def _take_slot(self, exchanges: list[dict[str, Any]], attempt: int) -> None:
        while not self.slots.acquire(timeout=POLL):
            self._unless_interrupted(exchanges, attempt)

    def _pause(self, seconds: float, exchanges: list[dict[str, Any]], attempt: int) -> None:
        until = time.monotonic() + seconds
        while (left := until - time.monotonic()) > 0:
            self._unless_interrupted(exchanges, attempt)
            time.sleep(min(left, POLL))
        self._unless_interrupted(exchanges, attempt)

    def _unless_interrupted(self, exchanges: list[dict[str, Any]], attempt: int) -> None:
        if interrupted():
            exchanges[-1].setdefault("error", "interrupted")
            raise ProviderError(
                f"interrupted while waiting on {self.url}",
                tuple(exchanges),
                Usage(requests=attempt),
            )

    def _exchange(
        self,
        body: Mapping[str, Any],
        headers: Mapping[str, str],
        exchanges: list[dict[str, Any]],
        attempt: int,
    ) -> httpx.Response:
        """One request and its whole reply, within the deadline and the byte cap.

        Returns the reply with its body read (decoded); raises what httpx raises, a
        :class:`httpx.TimeoutException` at the deadline, :class:`ReplyTooLarge`, or
        :class:`ProviderError` when interrupted.
        """
        carrier = _Carrier(self.client, self.url, body, headers, self.config.max_reply_bytes)
        deadline = time.monotonic() + self.config.timeout
        carrier.start()
        while not carrier.done.wait(min(POLL, max(deadline - time.monotonic(), 0.0))):
            if interrupted():
                carrier.abandon()
                self._unless_interrupted(exchanges, attempt)
            if time.monotonic() >= deadline:
                carrier.abandon()
                raise httpx.TimeoutException("the exchange's deadline passed")
        if isinstance(carrier.error, (httpx.DecodingError, zlib.error)):
            exchanges[-1]["error"] = f"undecodable reply: {carrier.error}"
            raise ProviderError(
                f"unreadable reply from {self.url} ({carrier.error})",
                tuple(exchanges),
                Usage(requests=attempt),
            )
        if carrier.error is not None:
            raise carrier.error
        if carrier.too_large is not None:
            received, status = carrier.too_large
            exchanges[-1]["response"] = {"status": status, "body": f"(not kept: over {received})"}
            exchanges[-1]["error"] = f"reply over max_reply_bytes = {self.config.max_reply_bytes:,}"
            raise ReplyTooLarge(
                f"the reply from {self.url} is {received}, over max_reply_bytes = "
                f"{self.config.max_reply_bytes:,} of [providers.{self.config.name}]; "
                "it was not read further nor kept",
                tuple(exchanges),
                Usage(requests=attempt),
            )
        assert carrier.response is not None
        return carrier.response

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


class _Carrier(threading.Thread):
    """One exchange in a daemon thread: the caller waits on ``done`` and may leave early."""

    def __init__(
        self,
        client: httpx.Client,
        url: str,
        body: Mapping[str, Any],
        headers: Mapping[str, str],
        cap: int,
    ) -> None:
        super().__init__(name="trysquare-judge-request", daemon=True)
        self.client, self.url, self.body, self.headers, self.cap = client, url, body, headers, cap
        self.done = threading.Event()
        self.response: httpx.Response | None = None
        self.error: BaseException | None = None
        self.too_large: tuple[str, int] | None = None  # ("N bytes", status)
        self._abandoned = threading.Event()
        self._streamed: httpx.Response | None = None

    def abandon(self) -> None:
        """The caller has left: stop at the next byte, keep nothing. Once the headers have
        come, the socket is shut down too, so a read blocked on a silent server ends now
        rather than at httpx's per-read timeout (and its connection is not reused)."""
        self._abandoned.set()
        streamed = self._streamed
        if streamed is None:
            return
        stream = streamed.extensions.get("network_stream")
        sock = None if stream is None else stream.get_extra_info("socket")
        if isinstance(sock, socket.socket):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # closed meanwhile

    def run(self) -> None:
        try:
            sent = self.client.stream("POST", self.url, json=self.body, headers=dict(self.headers))
            with sent as streamed:
                self._streamed = streamed
                if self._abandoned.is_set():
                    return
                decoder = _decoder(streamed.headers.get("content-encoding", ""))
                kept = bytearray()
                # Raw bytes, decoded here at most one byte past the cap: a compressed reply
                # (a few kilobytes of gzip that inflate to gigabytes) never exceeds it in memory.
                for raw in streamed.iter_raw():
                    if self._abandoned.is_set():
                        return
                    kept += decoder.decompress(raw, self.cap + 1 - len(kept)) if decoder else raw
                    if len(kept) > self.cap:
                        self.too_large = (_size_said(streamed, self.cap), streamed.status_code)
                        return
                if decoder is not None:
                    kept += decoder.flush()
                if self._abandoned.is_set():
                    return
                if len(kept) > self.cap:
                    self.too_large = (_size_said(streamed, self.cap), streamed.status_code)
                    return
                wire = {k: v for k, v in streamed.headers.items() if k.lower() not in _WIRE_HEADERS}
                self.response = httpx.Response(
                    streamed.status_code,
                    headers=wire,
                    content=bytes(kept),
                    request=streamed.request,
                )
        except BaseException as error:  # noqa: BLE001 - handed to the caller, who decides
            self.error = error
        finally:
            self.done.set()


def _decoder(encoding: str) -> Any:
    """A bounded decompressor for the reply's ``Content-Encoding`` (``None``: as is).

    :raises httpx.DecodingError: an encoding that was not asked for.
    """
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return None
    if encoding in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if encoding == "deflate":
        return zlib.decompressobj()  # zlib-wrapped, as HTTP's "deflate" is
    raise httpx.DecodingError(f"the reply is encoded as '{encoding}', which was not asked for")


def _size_said(response: httpx.Response, cap: int) -> str:
    """How big a reply over the cap is: its declared length when it has one."""
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > cap and "content-encoding" not in response.headers:
        return f"{int(declared):,} bytes"
    return f"more than {cap:,} bytes"


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
