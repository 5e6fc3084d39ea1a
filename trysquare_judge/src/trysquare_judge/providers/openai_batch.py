"""The OpenAI Batch API, for ``type = "openai"`` endpoints that have one (OpenAI itself; a
server without ``/v1/batches`` refuses the first call, and every run says so).

The facts it follows: the requests go up as a JSONL file (``POST /files``,
``purpose=batch``), one line ``{"custom_id", "method": "POST", "url":
"/v1/chat/completions", "body"}`` each; ``POST /batches`` creates the batch with a
``metadata`` object, where trysquare's own key for it goes (a batch created just before a
kill is found again by listing ``GET /batches``); ``GET /batches/{id}`` says its
``status`` and ``request_counts``; once ``completed``, ``failed``, ``expired`` or
``cancelled``, the answers are lines of the ``output_file_id`` and ``error_file_id``
(``GET /files/{id}/content``), ``{"custom_id", "response": {"status_code", "body"},
"error"}``, in no particular order. 50,000 requests and 200 MB a batch.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from trysquare_judge.batch import AnswerKind, BatchAnswer, BatchStatus
from trysquare_judge.batch.http import BatchHttp
from trysquare_judge.providers import ChatReply, ChatRequest, ProviderConfig, ProviderError, Usage

if TYPE_CHECKING:
    from trysquare_judge.providers.openai import OpenAIConnection

__all__ = ["METADATA_KEY", "OpenAIBatchClient"]

METADATA_KEY = "trysquare_batch"
CHAT_PATH = "/v1/chat/completions"
ENDED = frozenset({"completed", "failed", "expired", "cancelled"})
LIST_PAGES = 20  # pages of 100 batches looked through for an orphan: the newest come first


class OpenAIBatchClient:
    """The Batch API of one ``[providers.NAME]`` section of ``type = "openai"``."""

    max_requests = 50_000
    max_bytes = 200 * 1024 * 1024
    endpoint = CHAT_PATH

    def __init__(self, config: ProviderConfig, connection: OpenAIConnection) -> None:
        self.connection = connection
        self.base = (config.base_url or "https://api.openai.com/v1").rstrip("/")
        self.http = BatchHttp(config, {}, lambda key: {"Authorization": f"Bearer {key}"})

    def entry(self, custom_id: str, request: ChatRequest) -> Mapping[str, Any]:
        body = self.connection.body(request)
        body.pop("stream", None)  # a batch answers whole; the line's body is the request's own
        return {"custom_id": custom_id, "method": "POST", "url": CHAT_PATH, "body": body}

    def create(self, entries: Sequence[Mapping[str, Any]], *, key: str) -> str:
        data = "".join(json.dumps(entry, sort_keys=True) + "\n" for entry in entries).encode()
        uploaded = self.http.json(
            "POST", f"{self.base}/files",
            data={"purpose": "batch"}, files={"file": (f"{key}.jsonl", data, "application/jsonl")},
        )  # fmt: skip
        file_id = _text(uploaded, "id", "the uploaded file")
        created = self.http.json(
            "POST",
            f"{self.base}/batches",
            json={
                "input_file_id": file_id,
                "endpoint": CHAT_PATH,
                "completion_window": "24h",
                "metadata": {METADATA_KEY: key},
            },
        )
        return _text(created, "id", "the created batch")

    def adopt(
        self, key: str, *, created_after: float, requests: int, known: Collection[str]
    ) -> str | None:
        after: str | None = None
        for _ in range(LIST_PAGES):
            params: dict[str, Any] = {"limit": 100}
            if after:
                params["after"] = after
            page = self.http.json("GET", f"{self.base}/batches", params=params)
            batches = page.get("data") if isinstance(page, dict) else None
            if not isinstance(batches, list):
                return None
            for batch in batches:
                if not isinstance(batch, dict):
                    continue
                metadata = batch.get("metadata") or {}
                if (
                    isinstance(metadata, dict)
                    and metadata.get(METADATA_KEY) == key
                    and batch.get("id") not in known
                ):
                    return str(batch["id"])
            oldest = (
                batches[-1].get("created_at") if batches and isinstance(batches[-1], dict) else None
            )
            if not page.get("has_more") or (
                isinstance(oldest, (int, float)) and oldest < created_after - 3600
            ):
                return None
            after = page.get("last_id") or (batches[-1].get("id") if batches else None)
        return None

    def status(self, batch_id: str) -> BatchStatus:
        batch = self.http.json("GET", f"{self.base}/batches/{batch_id}")
        if not isinstance(batch, dict):
            raise ProviderError(f"unreadable batch {batch_id}: not an object")
        state = str(batch.get("status"))
        counts = batch.get("request_counts") or {}
        total, completed, failed = (_count(counts, k) for k in ("total", "completed", "failed"))
        handles = tuple(str(batch[k]) for k in ("output_file_id", "error_file_id") if batch.get(k))
        return BatchStatus(
            ended=state in ENDED, state=state, done=completed, failed=failed,
            pending=max(total - completed - failed, 0), handles=handles,
        )  # fmt: skip

    def results(self, batch_id: str, status: BatchStatus) -> Iterator[str]:
        for file_id in status.handles:
            response = self.http.call("GET", f"{self.base}/files/{file_id}/content")
            yield from (line for line in response.text.splitlines() if line.strip())

    def read(self, line: str) -> BatchAnswer:
        data = json.loads(line)
        if not isinstance(data, dict) or not isinstance(data.get("custom_id"), str):
            raise TypeError("no custom_id")
        custom_id = data["custom_id"]
        response = data.get("response")
        error = data.get("error")
        if isinstance(error, dict) or not isinstance(response, dict):
            code = str((error or {}).get("code") or "") if isinstance(error, dict) else ""
            message = (
                str((error or {}).get("message") or "no response")
                if isinstance(error, dict)
                else "no response"
            )
            kind: AnswerKind = "expired" if "expired" in code else "errored"
            return BatchAnswer(
                custom_id=custom_id,
                kind=kind,
                response=data,
                error=f"{code}: {message}".strip(": "),
            )
        body = response.get("body")
        if response.get("status_code") != 200:
            return BatchAnswer(
                custom_id=custom_id, kind="errored", response=response,
                error=f"HTTP {response.get('status_code')}: {json.dumps(body)[:500]}",
            )  # fmt: skip
        from trysquare_judge.providers.openai import read_completion, usage_of

        try:
            content, calls = read_completion(body)
        except (ValueError, KeyError, IndexError, TypeError) as problem:
            return BatchAnswer(
                custom_id=custom_id, kind="errored", response=response,
                error=f"unreadable reply ({type(problem).__name__}: {problem})",
            )  # fmt: skip
        usage = usage_of(body)
        reply = ChatReply(content=content, tool_calls=calls, usage=Usage(
            requests=1, input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
            cached_tokens=usage.cached_tokens,
        ))  # fmt: skip
        return BatchAnswer(custom_id=custom_id, kind="succeeded", reply=reply, response=body)

    def cancel(self, batch_id: str) -> None:
        self.http.call("POST", f"{self.base}/batches/{batch_id}/cancel")


def _text(data: Any, key: str, what: str) -> str:
    value = data.get(key) if isinstance(data, dict) else None
    if not isinstance(value, str) or not value:
        raise ProviderError(f"{what} came back with no {key}")
    return value


def _count(counts: Any, key: str) -> int:
    value = counts.get(key) if isinstance(counts, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
