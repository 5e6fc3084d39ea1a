"""The Message Batches API, for ``type = "anthropic"`` (``batch = true`` on a judge).

The facts it follows: ``POST /v1/messages/batches {"requests": [{"custom_id", "params"}]}``
(``custom_id`` matches ``^[a-zA-Z0-9_-]{1,64}$``; ``params`` is a Messages request, not
streamed); ``GET /v1/messages/batches/{id}`` says its ``processing_status``
(``in_progress``, ``canceling``, ``ended``) and ``request_counts``; once ``ended``, its
``results_url`` streams one JSON line per request, in no particular order: ``{"custom_id",
"result": {"type": "succeeded" | "errored" | "canceled" | "expired", ...}}``. 100,000
requests or 256 MB a batch; results are kept 29 days.

A batch carries no metadata, so one created just before trysquare was killed (its id
never recorded) is found by listing the newest batches for one that is not known yet,
holds the same number of requests and was created after trysquare recorded it was about
to create it. Two commands creating batches of the same size at the same second under one
key could adopt each other's; each request's ``custom_id`` then matches none of the
items, which are sent again: a verdict is never read from another's batch, but it may be
paid twice (the gap OpenAI's metadata closes).
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any

from trysquare_judge.batch import AnswerKind, BatchAnswer, BatchStatus
from trysquare_judge.batch.http import BatchHttp
from trysquare_judge.providers import ChatReply, ChatRequest, ProviderConfig, ProviderError, Usage

from trysquare_anthropic import wire
from trysquare_anthropic.connection import messages_url
from trysquare_anthropic.provider import AnthropicOptions

__all__ = ["AnthropicBatchClient"]

LIST_PAGES = 10  # pages of 100 batches looked through for an orphan, newest first
CLOCK_SLACK = 300.0  # seconds: the provider's clock and this machine's may differ
KINDS: frozenset[str] = frozenset({"succeeded", "errored", "canceled", "expired"})


class AnthropicBatchClient:
    """The Message Batches API of one ``[providers.NAME]`` section of ``type = "anthropic"``."""

    max_requests = 100_000
    max_bytes = 256 * 1024 * 1024

    def __init__(self, config: ProviderConfig) -> None:
        self.config = config
        options = (
            config.options if isinstance(config.options, AnthropicOptions) else AnthropicOptions()
        )
        headers = {"content-type": "application/json", "anthropic-version": options.version}
        if options.beta:
            headers["anthropic-beta"] = ",".join(options.beta)
        self.endpoint = messages_url(config.base_url)
        self.url = self.endpoint + "/batches"
        self.http = BatchHttp(config, headers, lambda key: {"x-api-key": key})

    def entry(self, custom_id: str, request: ChatRequest) -> Mapping[str, Any]:
        params = wire.body(request, self.config.tool_choice)
        params.pop("stream", None)  # a batch answers whole
        return {"custom_id": custom_id, "params": params}

    def create(self, entries: Sequence[Mapping[str, Any]], *, key: str) -> str:
        created = self.http.json("POST", self.url, json={"requests": list(entries)})
        batch_id = created.get("id") if isinstance(created, dict) else None
        if not isinstance(batch_id, str) or not batch_id:
            raise ProviderError("the created batch came back with no id")
        return batch_id

    def adopt(
        self, key: str, *, created_after: float, requests: int, known: Collection[str]
    ) -> str | None:
        after: str | None = None
        found: list[tuple[float, str]] = []
        for _ in range(LIST_PAGES):
            params: dict[str, Any] = {"limit": 100}
            if after:
                params["after_id"] = after
            page = self.http.json("GET", self.url, params=params)
            batches = page.get("data") if isinstance(page, dict) else None
            if not isinstance(batches, list) or not batches:
                break
            oldest = None
            for batch in batches:
                if not isinstance(batch, dict) or batch.get("id") in known:
                    continue
                created = _when(batch.get("created_at"))
                oldest = (
                    created
                    if oldest is None or (created is not None and created < oldest)
                    else oldest
                )
                counts = batch.get("request_counts") or {}
                total = (
                    sum(v for v in counts.values() if isinstance(v, int))
                    if isinstance(counts, dict)
                    else -1
                )
                if (
                    created is not None
                    and created >= created_after - CLOCK_SLACK
                    and total == requests
                ):
                    found.append((created, str(batch["id"])))
            if not page.get("has_more") or (
                oldest is not None and oldest < created_after - CLOCK_SLACK
            ):
                break
            after = page.get("last_id")
        return min(found)[1] if found else None

    def status(self, batch_id: str) -> BatchStatus:
        batch = self.http.json("GET", f"{self.url}/{batch_id}")
        if not isinstance(batch, dict):
            raise ProviderError(f"unreadable batch {batch_id}: not an object")
        state = str(batch.get("processing_status"))
        counts = batch.get("request_counts")
        number = {
            k: v for k, v in (counts if isinstance(counts, dict) else {}).items()
            if isinstance(v, int) and not isinstance(v, bool)
        }  # fmt: skip
        url = batch.get("results_url")
        return BatchStatus(
            ended=state == "ended",
            state=state,
            done=number.get("succeeded", 0),
            failed=sum(number.get(k, 0) for k in ("errored", "canceled", "expired")),
            pending=number.get("processing", 0),
            handles=(url,) if isinstance(url, str) and url else (),
        )

    def results(self, batch_id: str, status: BatchStatus) -> Iterator[str]:
        for url in status.handles:
            response = self.http.call("GET", url)
            yield from (line for line in response.text.splitlines() if line.strip())

    def read(self, line: str) -> BatchAnswer:
        data = json.loads(line)
        if not isinstance(data, dict) or not isinstance(data.get("custom_id"), str):
            raise TypeError("no custom_id")
        result = data.get("result")
        kind = result.get("type") if isinstance(result, dict) else None
        if not isinstance(result, dict) or kind not in KINDS:
            raise TypeError(f"no result type among {', '.join(sorted(KINDS))}")
        answer_kind: AnswerKind = kind
        if kind != "succeeded":
            error = result.get("error")
            return BatchAnswer(
                custom_id=data["custom_id"],
                kind=answer_kind,
                response=result,
                error=json.dumps(error)[:500] if error is not None else kind,
            )
        message = result.get("message")
        try:
            content, calls = wire.read_reply(message)
        except (ValueError, TypeError) as problem:
            return BatchAnswer(
                custom_id=data["custom_id"],
                kind="errored",
                response=result,
                error=f"unreadable message ({problem})",
            )
        usage = wire.read_usage(message)
        reply = ChatReply(content=content, tool_calls=calls, usage=Usage(
            requests=1, input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
            cached_tokens=usage.cached_tokens,
        ))  # fmt: skip
        return BatchAnswer(
            custom_id=data["custom_id"], kind="succeeded", reply=reply, response=message
        )

    def cancel(self, batch_id: str) -> None:
        self.http.call("POST", f"{self.url}/{batch_id}/cancel")


def _when(value: Any) -> float | None:
    """An RFC 3339 time (``2026-12-02T13:00:00Z``) as seconds since the epoch."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None
