"""Batch judging: what a provider implements to take many verdicts at once, at batch price.

A provider type declares batch support by giving itself a ``batch_client(config)``
method returning a :class:`BatchClient`; ``batch = true`` on a judge table is refused at
load for a type without one. The judge (:mod:`trysquare_judge.batch.engine`) keeps every
item's state in the experiment's ``.trysquare/batches.sqlite`` before each network call;
a client only speaks its provider's wire format.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any, Literal, Protocol

import attrs

from trysquare_judge.providers import ChatReply, ChatRequest, ProviderConfig

__all__ = [
    "AnswerKind",
    "BatchAnswer",
    "BatchClient",
    "BatchStatus",
    "batch_client_for",
    "supports_batches",
]

AnswerKind = Literal["succeeded", "errored", "expired", "canceled"]


@attrs.frozen(kw_only=True)
class BatchStatus:
    """One look at a batch, in the judge's terms."""

    ended: bool
    """The provider is done with it: its results (possibly partial) can be fetched."""
    state: str
    """The provider's own word for its state (``in_progress``, ``completed``, ``ended``...)."""
    done: int = 0
    """Requests answered."""
    failed: int = 0
    """Requests that failed (errored, expired, cancelled)."""
    pending: int = 0
    """Requests not answered yet."""
    handles: tuple[str, ...] = ()
    """Where its results are (OpenAI: the output and error file ids; Anthropic: the
    ``results_url``), handed back to :meth:`BatchClient.results`."""


@attrs.frozen(kw_only=True)
class BatchAnswer:
    """One line of a batch's results, read."""

    custom_id: str
    """The request it answers."""
    kind: AnswerKind
    """``succeeded`` (``reply`` holds the reply), ``errored``, ``expired`` or ``canceled``."""
    reply: ChatReply | None = None
    """The reply of a succeeded request, as an interactive request would have returned it."""
    response: Any = None
    """The response as the provider wrote it, for the transcript."""
    error: str | None = None
    """Why a request that did not succeed failed."""


class BatchClient(Protocol):
    """One configured endpoint's batch API. Every method raises
    :class:`~trysquare_judge.providers.ProviderError` when it gives up, and never puts a
    key in what it returns or raises."""

    max_requests: int
    """The most requests one batch may hold."""
    max_bytes: int
    """The most bytes one batch's requests may weigh, as sent."""
    endpoint: str
    """The address each request is for, as the transcript records it."""

    def entry(self, custom_id: str, request: ChatRequest) -> Mapping[str, Any]:
        """One request as the batch holds it (``custom_id`` beside the request's body)."""
        ...

    def create(self, entries: Sequence[Mapping[str, Any]], *, key: str) -> str:
        """Create a batch of ``entries``; return its id. ``key`` (trysquare's own name for
        it) goes with the batch where the API keeps such things, for :meth:`adopt`."""
        ...

    def adopt(
        self, key: str, *, created_after: float, requests: int, known: Collection[str]
    ) -> str | None:
        """The id of a batch created under ``key`` whose id was never recorded (trysquare
        was killed while creating it), or ``None`` when there is none. ``known`` are ids
        already recorded, never adopted twice."""
        ...

    def status(self, batch_id: str) -> BatchStatus:
        """Look at a batch once."""
        ...

    def results(self, batch_id: str, status: BatchStatus) -> Iterator[str]:
        """The lines of an ended batch's results, as the provider sends them (any order)."""
        ...

    def read(self, line: str) -> BatchAnswer:
        """One result line, read; ``ValueError`` or ``TypeError`` when it is not one."""
        ...

    def cancel(self, batch_id: str) -> None:
        """Ask the provider to cancel a batch."""
        ...


def supports_batches(provider: Any) -> bool:
    """Whether a registered provider type declares batch support (a ``batch_client`` method)."""
    return callable(getattr(provider, "batch_client", None))


def batch_client_for(config: ProviderConfig) -> BatchClient | None:
    """The batch client of ``config``'s provider type, or ``None`` when it has none."""
    from trysquare_judge.providers import provider_types

    provider = provider_types().get(config.type)
    if provider is None or not supports_batches(provider):
        return None
    client: BatchClient = provider.batch_client(config)  # type: ignore[attr-defined]  # declared by supports_batches
    return client
