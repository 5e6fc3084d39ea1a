"""The transport batch clients share: one request at a time, retried like a verdict's.

A batch call (upload, create, look, fetch, cancel) is not a verdict: it is not bounded by
``max_concurrency`` nor recorded in a transcript. It keeps the section's ``timeout``,
``max_retries`` and ``retry_backoff`` (408, 429, every 5xx, a lost connection and a
timeout are retried) and never puts the key in an error.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping
from typing import Any

import httpx

from trysquare_judge.providers import ProviderConfig, ProviderError, api_key
from trysquare_judge.providers.http import MAX_BACKOFF, RETRIED_STATUSES, snippet
from trysquare_judge.scrub import scrub

__all__ = ["BatchHttp"]


class BatchHttp:
    """A client for one endpoint's batch calls; ``auth(key)`` gives the key's headers."""

    def __init__(self, config: ProviderConfig, headers: Mapping[str, str], auth: Any) -> None:
        self.config = config
        self.headers = dict(headers)
        self.auth = auth
        self.client = httpx.Client(
            timeout=config.timeout, verify=not (config.base_url or "").startswith("http://")
        )

    def call(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        """Send one request until it is answered; a 2xx response, else :class:`ProviderError`."""
        key = api_key(self.config)
        headers = {**self.headers, **(self.auth(key) if key else {})}
        attempts = self.config.max_retries + 1
        problem = "failed"
        for attempt in range(1, attempts + 1):
            try:
                response = self.client.request(method, url, headers=headers, **kwargs)
            except httpx.TransportError as error:
                problem = scrub(f"connection failed: {type(error).__name__}: {error}", [key])
            else:
                if response.status_code < 300:
                    return response
                if response.status_code not in RETRIED_STATUSES and response.status_code < 500:
                    raise ProviderError(
                        f"HTTP {response.status_code} from {method} {url}: {snippet(response, key)}"
                    )
                problem = f"HTTP {response.status_code}"
            if attempt < attempts:
                backoff = (
                    self.config.retry_backoff * (2 ** (attempt - 1)) * (1 + random.random() / 10)
                )
                time.sleep(min(backoff, MAX_BACKOFF))
        raise ProviderError(f"{problem} from {method} {url} (gave up after {attempts} attempt(s))")

    def json(self, method: str, url: str, **kwargs: Any) -> Any:
        """:meth:`call`, its body read as JSON (:class:`ProviderError` when it is not)."""
        response = self.call(method, url, **kwargs)
        try:
            return response.json()
        except ValueError:
            raise ProviderError(
                f"unreadable reply from {method} {url}: {snippet(response, None)}"
            ) from None
