"""The judge mode: a pinned model whose verdict is a schema-checked tool call.

One conversation per run: the fixed instructions and the rubric, then the
declared pieces. A verdict call whose arguments fail the schema, or an answer in
prose, is answered with the error and may be corrected within the same
conversation, ``max_turns`` replies in all. No valid call leaves the run
invalid — a broken judge never reads as a negative verdict. No repetition, no
vote: the matrix already repeats.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import attrs
from trysquare.api import (
    Outcome,
    ScenarioError,
    TableSource,
    Validation,
    ValidationTask,
    check_pieces,
    refuse_hard_link,
    write_with_history,
)
from trysquare.api import (
    digest as canonical_digest,
)

from trysquare_judge import blinding, prompt, scrub
from trysquare_judge.providers import (
    THINKING,
    ChatReply,
    ChatRequest,
    Message,
    ProviderConfig,
    ProviderError,
    ReplyTooLarge,
    ToolSpec,
    Usage,
    connection_for,
    resolve_provider,
)
from trysquare_judge.verdict import (
    TOOL_DESCRIPTION,
    TOOL_NAME,
    VerdictError,
    parse_verdict,
    validator_for,
    verdict_schema,
)

if TYPE_CHECKING:
    from collections.abc import Iterable

    from trysquare.api import Gathered, Gathering, LoadedScenario, Run

__all__ = ["JudgeMode", "JudgeValidation"]

DEFAULT_MAX_TURNS = 3
# A piece larger than this is not sent: the judge result is unjudged for that run.
# 1 MiB is already some 250k tokens, beyond most judges' context windows.
DEFAULT_MAX_PIECE_BYTES = 1024 * 1024
TRANSCRIPT = "transcript.json"
TRANSCRIPT_HISTORY = "transcript.history.jsonl"
NEVER_CALLED = "judge never called the verdict tool"


@attrs.frozen(kw_only=True)
class _JudgeTable:
    """The keys a judge table may hold, structured strictly."""

    mode: str
    provider: str
    model: str
    thinking: str
    rubric: str
    pieces: tuple[str, ...]
    metrics: tuple[str, ...]
    name: str = ""
    max_turns: int = DEFAULT_MAX_TURNS
    max_piece_bytes: int = DEFAULT_MAX_PIECE_BYTES
    batch: bool = False


@attrs.frozen(kw_only=True)
class JudgeValidation(Validation):
    """A ``[[validation]] mode = "judge"`` table, its rubric read and its provider resolved."""

    provider: str
    model: str
    thinking: str
    rubric: str  # as the scenario wrote it
    pieces: tuple[str, ...]
    max_turns: int = DEFAULT_MAX_TURNS
    rubric_text: str = ""
    endpoint: ProviderConfig | None = None
    # Not part of the digest: raising the cap must not re-pay every verdict already given
    # (the runs it left unjudged are asked again with --rejudge).
    max_piece_bytes: int = DEFAULT_MAX_PIECE_BYTES
    # Not part of the digest either: a verdict is the same verdict, by batch or not.
    batch: bool = False

    # pass_env too: the suite's settings are no business of the judge, and a context
    # that gains them must not make a paid verdict stale.
    withheld_context_keys: ClassVar[frozenset[str]] = frozenset({"cell", "given", "pass_env"})
    costly: ClassVar[bool] = True  # a paid verdict is asked again only under --rejudge
    confines_what_it_runs: ClassVar[bool] = True  # it starts no process

    # -- identity -------------------------------------------------------------

    def digest(self) -> str:
        # What the verdict depends on, and nothing that only tunes the transport
        # (timeouts, retries, concurrency): changing those keeps verdicts current.
        identity = {
            "rubric": self.rubric_text,
            "model": self.model,
            "provider": self.endpoint.identity() if self.endpoint else self.provider,
            "thinking": self.thinking,
            "pieces": list(self.pieces),
            "metrics": list(self.metrics),
            "max_turns": self.max_turns,
            "template": prompt.TEMPLATE,
            "tool": [TOOL_NAME, TOOL_DESCRIPTION],
        }
        return canonical_digest(identity)

    def context_identity(self, context: Mapping[str, Any]) -> str:
        """The request this judge would send for ``context``: its system message (the
        rubric), its user message (the pieces as sent), the model, thinking and the
        verdict tool's schema. Never a path: a copied or moved experiment folder, or a
        piece it is not shown changing, keeps the verdict current (nothing is paid again).
        A piece not recorded or over ``max_piece_bytes`` (nothing sent) is named instead.
        """
        texts: dict[str, str] = {}
        unsent: dict[str, Any] = {}
        for piece in self.pieces:
            if context.get(piece) is None:
                unsent[piece] = "not recorded"
                continue
            text, size = prompt.read_piece_capped(context, piece, self.max_piece_bytes)
            if text is None:
                unsent[piece] = {"over max_piece_bytes": size}
            else:
                texts[piece] = text
        request: dict[str, Any] = {
            "provider": self.endpoint.identity() if self.endpoint else self.provider,
            "model": self.model,
            "thinking": self.thinking,
            "system": prompt.system_message(self.rubric_text, self.metrics),
            "tool": [TOOL_NAME, TOOL_DESCRIPTION, verdict_schema(self.metrics)],
            "max_turns": self.max_turns,
        }
        if unsent:
            request["unsent"] = unsent
        else:
            request["user"] = prompt.user_message(texts, self.pieces)
        return canonical_digest(request)

    # -- refusals once runs are given -------------------------------------------

    def check_runs(self, scenario: LoadedScenario, runs: Sequence[Run]) -> list[str]:
        qualified = f"{self.provider}/{self.model}"
        for run in runs:
            if run.model is not None and run.model in (qualified, self.model):
                raise ScenarioError(
                    f"{scenario.path.name}: validator '{self.name}': the judge {qualified} is the "
                    f"model under test in run '{run.id}' ({run.dir}, model = \"{run.model}\"); "
                    "pin a judge distinct from the model being judged"
                )
        endpoint = self.endpoint
        if endpoint is not None and endpoint.api_key_env and endpoint.api_key_env not in os.environ:
            # Refused before anything is spent: every run would come back invalid.
            raise ScenarioError(
                f"{endpoint.source}: api_key_env: the variable {endpoint.api_key_env} is not set "
                f"(validator '{self.name}' reads its key from it)"
            )
        if not runs:
            return []
        return [blinding.blinding_line(runs, self.pieces, max_piece_bytes=self.max_piece_bytes)]

    def prepare(self) -> None:
        # The HTTP client is slow to import: done beside planning, not by the first
        # verdict while every other task waits on it. (`check` never calls this.)
        import threading

        threading.Thread(
            target=_import_transport, name="trysquare-judge-import", daemon=True
        ).start()

    # -- one run ----------------------------------------------------------------

    def evaluate(self, task: ValidationTask) -> Outcome:
        planted = _planted_link(task.archive)
        if planted is not None:
            # Refused before anything is sent: the transcript could not be kept after paying.
            return Outcome.invalid(f"judge '{self.name}': {planted}; nothing was sent to the judge")
        if self.batch:
            from trysquare_judge.batch import engine

            return engine.gather(self, task)
        transcript: dict[str, Any] = {
            "validator": self.name,
            "provider": self.provider,
            "type": self.endpoint.type if self.endpoint else None,
            "model": self.model,
            "thinking": self.thinking,
            "digest": self.digest(),
            "exchanges": [],
        }
        # Every key this machine's judges hold, scrubbed in every encoding from all
        # that is written or printed: the transcript, the reasons, the error.
        keys = scrub.keys_from_environment(
            [self.endpoint.api_key_env if self.endpoint else None, *sorted(task.protected_env)]
        )
        # Written even when the conversation crashes: the exchanges so far are the evidence.
        outcome = Outcome.invalid(f"judge '{self.name}' stopped before its conversation ended")
        spent: list[Usage] = []  # one entry per reply or provider failure, in order
        try:
            outcome = self._converse(task, transcript["exchanges"], spent)
        finally:
            usage = self.usage_record(spent)
            if outcome.kept_after is not None:  # the kept verdict's spending stays counted
                usage = _added_usage((task.previous or {}).get("usage"), usage)
            outcome = attrs.evolve(_scrubbed(outcome, keys), usage=usage)
            transcript["usage"] = dict(outcome.usage or {})
            transcript["outcome"] = {"state": outcome.state, "error": outcome.error}
            _write_transcript(task.archive, scrub.scrub_value(transcript, keys), root=task.run.dir)
        return outcome

    # -- batch judging (batch = true) ------------------------------------------------------

    def resume_gathered(self, gathering: Gathering) -> Iterable[Gathered]:
        if not self.batch:
            return ()
        from trysquare_judge.batch import engine

        session = engine.begin(self, gathering)
        return () if session is None else engine.collect(session, wait=False, last=False)

    def send_gathered(self, gathering: Gathering) -> Iterable[Gathered]:
        if not self.batch:
            return ()
        from trysquare_judge.batch import engine

        session = engine.session_for(self)
        return () if session is None else engine.collect(session, wait=gathering.wait, last=True)

    def usage_record(self, spent: Sequence[Usage]) -> dict[str, Any]:
        """What this conversation spent, and the price in force for the provider that answered.

        The price is recorded with the tokens, at judging time: the cost is what
        these tokens cost from this provider when they were spent, whatever the
        scenario or ``trysquare.toml`` say later (another provider, a new price).
        Nothing sent is zero; a count the provider did not report is ``None``.
        """
        if spent:
            total = sum(spent[1:], spent[0])
        else:
            total = Usage(requests=0, input_tokens=0, output_tokens=0, cached_tokens=0)
        endpoint = self.endpoint
        return {
            "requests": total.requests,
            "input_tokens": total.input_tokens,
            "output_tokens": total.output_tokens,
            "cached_tokens": total.cached_tokens,
            "provider": self.provider,
            "model": self.model,
            "price_input": None if endpoint is None else endpoint.price_input,
            "price_output": None if endpoint is None else endpoint.price_output,
        }

    def first_request(self, task: ValidationTask) -> ChatRequest | Outcome:
        """The conversation's first request for ``task``'s run, or the outcome that stands
        instead when nothing may be sent (a piece not recorded or over the cap: unjudged)."""
        texts: dict[str, str] = {}
        for piece in self.pieces:
            if task.context.get(piece) is None:
                # Unknown is not empty: a judge shown "(empty)" would score a note nobody saw.
                return self._unjudged(
                    f"no {piece} was recorded for this run; nothing was sent to the judge"
                )
            text, size = prompt.read_piece_capped(task.context, piece, self.max_piece_bytes)
            if text is None:
                # Nothing is sent: a judge handed a truncated piece would judge something else.
                return self._unjudged(
                    f"the {piece} piece is {size:,} bytes, over max_piece_bytes = "
                    f"{self.max_piece_bytes:,}; nothing was sent to the judge"
                )
            texts[piece] = text
        assert self.endpoint is not None
        if self.endpoint.api_key_env and self.endpoint.api_key_env not in os.environ:
            return Outcome.invalid(
                f"judge provider '{self.provider}': the variable {self.endpoint.api_key_env} is not set"
            )
        return self.request(
            (Message(role="user", content=prompt.user_message(texts, self.pieces)),)
        )

    def request(self, messages: Sequence[Message]) -> ChatRequest:
        """The request carrying ``messages`` (the conversation so far) to this judge."""
        tool = ToolSpec(TOOL_NAME, TOOL_DESCRIPTION, verdict_schema(self.metrics))
        system = prompt.system_message(self.rubric_text, self.metrics)
        return ChatRequest(
            model=self.model,
            thinking=self.thinking,
            system=system,
            messages=tuple(messages),
            tool=tool,
        )

    def _converse(
        self, task: ValidationTask, exchanges: list[Mapping[str, Any]], spent: list[Usage]
    ) -> Outcome:
        assert self.endpoint is not None
        first = self.first_request(task)
        if isinstance(first, Outcome):
            return first
        messages: list[Message] = list(first.messages)
        try:
            connection = connection_for(self.endpoint)
        except ProviderError as error:
            return Outcome.invalid(f"judge provider '{self.provider}': {error.message}")
        last_error: str | None = None
        for _ in range(self.max_turns):
            request = self.request(messages)
            try:
                reply = connection.complete(request)
            except ReplyTooLarge as error:
                # Nobody read the reply whole: no verdict, and not the run's fault.
                exchanges.extend(error.exchanges)
                spent.append(error.usage or Usage(requests=len(error.exchanges)))
                return self._unjudged(f"judge provider '{self.provider}': {error.message}")
            except ProviderError as error:
                exchanges.extend(error.exchanges)
                # A provider that does not count its attempts sent at least one per exchange.
                spent.append(error.usage or Usage(requests=len(error.exchanges)))
                failure = f"judge provider '{self.provider}' failed: {error.message}"
                return _kept(task, failure) or Outcome.invalid(failure)
            exchanges.extend(reply.exchanges)
            spent.append(reply.usage or Usage(requests=max(1, len(reply.exchanges))))
            verdict, answers, problem = _read_reply(reply, self.metrics)
            if verdict is not None:
                return Outcome(metrics=dict(verdict.metrics), reasons=dict(verdict.reasons))
            if problem is not None:
                last_error = problem
            # The error goes back into the same conversation: the judge may correct itself.
            messages.append(
                Message(role="assistant", content=reply.content, tool_calls=reply.tool_calls)
            )
            messages.extend(answers)
        if last_error is None:
            return Outcome.invalid(NEVER_CALLED)
        return Outcome.invalid(f"verdict failed validation: {last_error}")

    def _unjudged(self, reason: str) -> Outcome:
        return Outcome(
            metrics=dict.fromkeys(self.metrics), reasons=dict.fromkeys(self.metrics, reason)
        )


def _added_usage(previous: Any, usage: dict[str, Any]) -> dict[str, Any]:
    """``usage`` with the counts of ``previous`` (a recorded usage) added where both are known."""
    if not isinstance(previous, Mapping):
        return usage
    added = dict(usage)
    for key in ("requests", "input_tokens", "output_tokens", "cached_tokens"):
        before, now = previous.get(key), usage.get(key)
        if type(before) is int and type(now) is int:
            added[key] = before + now
    return added


def _kept(task: ValidationTask, failure: str) -> Outcome | None:
    """The previous verdict, kept, when asking again (``--rejudge``) failed to get one and
    it is still current (same judge, same request); ``None`` otherwise.

    A provider that fails is not a verdict: a paid, valid verdict is never replaced by
    the outage. The failure is said (``kept_after``), and ``validate`` exits 1.
    """
    previous = task.previous or {}
    current = (
        task.previous_current
        and previous.get("state") == "valid"
        and isinstance(previous.get("metrics"), Mapping)
    )
    if not current:
        return None
    reasons = previous.get("reasons")
    return Outcome(
        metrics=dict(previous["metrics"]),
        reasons=dict(reasons) if isinstance(reasons, Mapping) else {},
        kept_after=f"kept the previous verdict: {failure}",
    )


def _scrubbed(outcome: Outcome, keys: Sequence[str]) -> Outcome:
    """``outcome`` with no key in its reasons or error, and every text safe to write."""
    return attrs.evolve(
        outcome,
        reasons={name: scrub.scrub(text, keys) for name, text in outcome.reasons.items()},
        error=None if outcome.error is None else scrub.scrub(outcome.error, keys),
        kept_after=None if outcome.kept_after is None else scrub.scrub(outcome.kept_after, keys),
    )


def _read_reply(reply: ChatReply, metrics: Sequence[str]) -> tuple[Any, list[Message], str | None]:
    """``(verdict, messages answering the reply, validation problem)``: one of the first two."""
    calls = [call for call in reply.tool_calls if call.name == TOOL_NAME]
    if not reply.tool_calls:
        return None, [Message(role="user", content=prompt.correction_for_prose(metrics))], None
    answers: list[Message] = []
    problem: str | None = None
    verdict = None
    for call in reply.tool_calls:
        if call.name != TOOL_NAME:
            text = f"error: there is no tool '{call.name}'; call `{TOOL_NAME}`"
        elif verdict is not None or (call is not calls[0]):
            text = f"error: `{TOOL_NAME}` is called once; this call was ignored"
        else:
            try:
                verdict = parse_verdict(call.arguments, metrics)
                text = "recorded"
            except VerdictError as error:
                problem = str(error)
                text = f"error: the verdict failed validation: {problem}. Call `{TOOL_NAME}` again, corrected."
        answers.append(Message(role="tool", content=text, tool_call_id=call.id))
    if verdict is None and problem is None:
        # Tools were called, but never `verdict`: as good as prose.
        answers.append(Message(role="user", content=prompt.correction_for_prose(metrics)))
    return verdict, answers, problem


def _planted_link(archive: Path) -> str | None:
    """Why the transcript files in ``archive`` cannot be written, when one is a symlink or a
    file with another name elsewhere (the previous transcript is read, then appended to its
    history: through a hard link, to a file outside the run)."""
    for name in (TRANSCRIPT, TRANSCRIPT_HISTORY):
        path = archive / name
        try:
            info = path.lstat()
        except OSError:
            continue  # absent (or its folder is): the writer says what is wrong, if anything
        if stat.S_ISLNK(info.st_mode):
            return f"{path} is a symlink; trysquare never writes or reads through a symlink there"
        try:
            refuse_hard_link(info, path)
        except OSError as refused:
            return str(refused)
    return None


def _write_transcript(archive: Path, transcript: Mapping[str, Any], *, root: Path) -> None:
    # Inside the run folder: never read or written through the agent's symlinks.
    # A re-judged run keeps the conversation its previous verdict came from. One line:
    # json's C encoder writes it (an indented dump runs the pure-Python encoder, a large
    # share of a judged task's own work); the view indents it for reading.
    write_with_history(
        archive / TRANSCRIPT, transcript, archive / TRANSCRIPT_HISTORY, root=root, compact=True
    )


class JudgeMode:
    name = "judge"

    def load(self, table: Mapping[str, Any], source: TableSource) -> JudgeValidation:
        raw = source.structure(table, _JudgeTable)
        if raw.thinking not in THINKING:
            raise source.refuse(
                "thinking", f"must be one of {', '.join(THINKING)}, not '{raw.thinking}'"
            )
        check_pieces(source, raw.pieces)
        if raw.max_turns < 1:
            raise source.refuse("max_turns", "must be at least 1")
        if raw.max_piece_bytes < 1:
            raise source.refuse("max_piece_bytes", "must be a positive number of bytes")
        if not raw.model.strip():
            raise source.refuse("model", "is empty; pin the judge's model")
        rubric_path = source.resolve(raw.rubric)
        try:
            rubric_text = rubric_path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise source.refuse(
                "rubric", f"'{raw.rubric}' does not exist (looked for {rubric_path})"
            ) from None
        except (OSError, UnicodeDecodeError) as error:
            raise source.refuse("rubric", f"'{raw.rubric}' cannot be read ({error})") from None
        if not rubric_text.strip():
            raise source.refuse("rubric", f"'{raw.rubric}' is empty")
        endpoint = resolve_provider(raw.provider, source.file, source.refuse, source.config)
        validator_for(raw.metrics)  # built now, so the first verdict does not pay for it
        if raw.batch:
            from trysquare_judge.batch import supports_batches
            from trysquare_judge.providers import provider_types

            if not supports_batches(provider_types().get(endpoint.type)):
                raise source.refuse(
                    "batch",
                    f"provider type '{endpoint.type}' (provider '{raw.provider}') declares no "
                    "batch support; remove batch = true, or use a provider type that has a batch API",
                )
        return JudgeValidation(
            mode=raw.mode,
            name=raw.name,
            metrics=raw.metrics,
            provider=raw.provider,
            model=raw.model,
            thinking=raw.thinking,
            rubric=raw.rubric,
            pieces=raw.pieces,
            max_turns=raw.max_turns,
            max_piece_bytes=raw.max_piece_bytes,
            rubric_text=rubric_text,
            endpoint=endpoint,
            batch=raw.batch,
        )


def _import_transport() -> None:
    try:
        import trysquare_judge.providers.http  # noqa: F401 - imported for its cost, paid early
    except Exception:  # noqa: BLE001, S110 - the first verdict imports it again and says why
        pass
