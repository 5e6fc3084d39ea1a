"""One run's panel: its diff, response, each validator's result, stderr, transcript, history.

Everything read here lives in a run folder, which the measured agent controls:
a file may be huge, binary, a symlink to a secret elsewhere, or hold markup. So
every read is bounded, refuses a symlink anywhere below the run folder and any
path resolving outside it, and every text goes through :func:`esc`.
"""

from __future__ import annotations

import errno
import html
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

__all__ = ["DIFF_FILE_CHARS", "esc", "read_inside", "run_panel"]

# Past these sizes a piece is cut, saying so and naming the full file: a page
# must open fast whatever one run wrote, however many runs the page shows.
DIFF_FILE_CHARS = 20_000
DIFF_READ_BYTES = 1_000_000
RESPONSE_CHARS = 20_000
STDERR_TAIL_BYTES = 4_000
TRANSCRIPT_CHARS = 30_000
TRANSCRIPT_READ_BYTES = 5_000_000
HISTORY_SHOWN = 5
HISTORY_READ_BYTES = 200_000

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


def esc(text: object) -> str:
    """``text`` as HTML text or an attribute value: markup, quotes and control characters neutralised."""
    value = _CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", str(text))
    return html.escape(value, quote=True)


class Refused(Exception):
    """A file of the run folder that is not shown (a symlink, outside the run, unreadable)."""


def read_inside(run_dir: Path, relative: str, limit: int, *, tail: bool = False) -> tuple[str, int]:
    """Up to ``limit`` bytes of ``run_dir/relative`` (the last ones with ``tail``) and its size.

    :raises FileNotFoundError: there is no such file.
    :raises Refused: a symlink on the way, a path outside the run folder, not a regular file.
    """
    # ``run_dir`` itself is resolved once by the caller (run_panel); below it, no
    # component may be a symlink and no part may climb out.
    path = run_dir
    for part in Path(relative).parts:
        if part in ("..", "/") or os.sep in part:
            raise Refused(f"{relative} is outside the run folder")
        path = path / part
        if path.is_symlink():
            raise Refused(f"{relative} is a symlink; not followed")
    try:
        fd = os.open(
            path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        )
    except OSError as error:
        if error.errno == errno.ENOENT:
            raise FileNotFoundError(relative) from None
        raise Refused(
            f"{relative} cannot be read ({errno.errorcode.get(error.errno or 0, 'error')})"
        ) from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        import stat

        if not stat.S_ISREG(info.st_mode):
            raise Refused(f"{relative} is not a regular file")
        if info.st_nlink > 1:
            # A hard link to a file elsewhere (a secret) would be shown as the run's.
            from trysquare.api import refuse_hard_link

            try:
                refuse_hard_link(info, Path(relative))
            except OSError as unsafe:
                raise Refused(str(unsafe)) from None
        size = info.st_size
        if tail and size > limit:
            handle.seek(size - limit)
        data = handle.read(limit)
    return data.decode("utf-8", errors="replace"), size


def _piece(
    run_dir: Path | None, relative: str, limit: int, *, tail: bool = False
) -> tuple[str | None, str]:
    """The text and a note (``""``, or why it is missing or cut)."""
    if run_dir is None:
        return None, "the run folder could not be read"
    try:
        text, size = read_inside(run_dir, relative, limit, tail=tail)
    except FileNotFoundError:
        return None, ""
    except Refused as refused:
        return None, f"not shown: {refused}"
    note = ""
    if size > limit:
        where = "last" if tail else "first"
        note = f"showing the {where} {limit:,} of {size:,} bytes; the whole file is {run_dir / relative}"
    return text, note


def _note(text: str) -> str:
    return f'<p class="note">{esc(text)}</p>' if text else ""


def _pre(text: str, cls: str = "") -> str:
    return f'<pre class="{cls}">{esc(text)}</pre>'


# -- the diff ---------------------------------------------------------------------------


def _split_diff(text: str) -> list[tuple[str, str]]:
    """``(file name, that file's part of the patch)`` in patch order."""
    files: list[tuple[str, list[str]]] = []
    for line in text.splitlines(keepends=True):
        if line.startswith("diff --git ") or not files:
            name = (
                line[len("diff --git ") :].strip() if line.startswith("diff --git ") else "(patch)"
            )
            match = re.match(r"a/(.*) b/", name)
            files.append((match.group(1) if match else name, []))
        files[-1][1].append(line)
    return [(name, "".join(lines)) for name, lines in files]


def _diff_line_class(line: str) -> str:
    if line.startswith(
        (
            "+++",
            "---",
            "diff --git",
            "index ",
            "new file",
            "deleted file",
            "similarity",
            "rename ",
            "old mode",
            "new mode",
            "Binary files",
        )
    ):
        return "dm"
    if line.startswith("@@"):
        return "dh"
    if line.startswith("+"):
        return "da"
    if line.startswith("-"):
        return "dd"
    return "dc"


# Light syntax colouring inside a diff's code lines, by file suffix: comments,
# strings and keywords. Tokens are found in the raw line and escaped one by one.
_KEYWORDS = {
    "py": "and as assert async await break class continue def del elif else except False finally "
    "for from global if import in is lambda None nonlocal not or pass raise return True try "
    "while with yield",
    "js": "async await break case catch class const continue default delete do else export "
    "extends false finally for function if import in instanceof let new null return super "
    "switch this throw true try typeof undefined var void while yield",
    "c": "break case char const continue default do double else enum extern float for fn func go "
    "goto if impl import int let long match mod mut package pub return self static struct "
    "switch type typedef unsigned use void while",
    "sh": "case do done elif else esac export fi for function if in local return then until while",
}
_LANGUAGES = {
    ".py": "py",
    ".pyi": "py",
    ".js": "js",
    ".mjs": "js",
    ".ts": "js",
    ".tsx": "js",
    ".jsx": "js",
    ".c": "c",
    ".h": "c",
    ".cc": "c",
    ".cpp": "c",
    ".hpp": "c",
    ".rs": "c",
    ".go": "c",
    ".java": "c",
    ".sh": "sh",
    ".bash": "sh",
}
_COMMENT = {"py": "#", "sh": "#", "js": "//", "c": "//"}
_TOKENS = {
    lang: re.compile(
        rf"(?P<comment>{re.escape(_COMMENT[lang])}.*)"
        r"|(?P<string>\"(?:[^\"\\]|\\.)*\"?|'(?:[^'\\]|\\.)*'?)"
        rf"|(?P<keyword>\b(?:{'|'.join(words.split())})\b)"
    )
    for lang, words in _KEYWORDS.items()
}
_TOKEN_CLASS = {"comment": "tc", "string": "ts", "keyword": "tk"}


def _highlight(code: str, lang: str | None) -> str:
    if lang is None:
        return esc(code)
    out, last = [], 0
    for match in _TOKENS[lang].finditer(code):
        kind = match.lastgroup or "keyword"
        out.append(esc(code[last : match.start()]))
        out.append(f'<i class="{_TOKEN_CLASS[kind]}">{esc(match.group())}</i>')
        last = match.end()
    out.append(esc(code[last:]))
    return "".join(out)


def _coloured(patch: str, name: str = "") -> str:
    # Only lines that need a colour get an element: context lines stay bare text.
    lang = _LANGUAGES.get(Path(name).suffix.lower())
    out = []
    for line in patch.split("\n"):
        kind = _diff_line_class(line)
        if kind in ("dm", "dh"):
            out.append(f'<span class="{kind}">{esc(line)}\n</span>')
            continue
        code = esc(line[:1]) + _highlight(line[1:], lang) if line else ""
        out.append(code + "\n" if kind == "dc" else f'<span class="{kind}">{code}\n</span>')
    return "".join(out).rstrip("\n")


def _diff_section(run_dir: Path | None) -> str:
    text, note = _piece(run_dir, "diff.patch", DIFF_READ_BYTES)
    out = ['<section class="diff"><h4>Diff</h4>', _note(note)]
    if text is None:
        if not note:
            out.append('<p class="note">no diff.patch recorded (validate writes it)</p>')
        out.append("</section>")
        return "".join(out)
    if not text.strip():
        out.append('<p class="note">the agent changed nothing</p>')
    full = run_dir / "diff.patch" if run_dir is not None else "diff.patch"
    for name, patch in _split_diff(text):
        cut = ""
        if len(patch) > DIFF_FILE_CHARS:
            cut = (
                f"truncated: showing {DIFF_FILE_CHARS:,} of {len(patch):,} characters; "
                f"the full diff is {full}"
            )
            patch = patch[:DIFF_FILE_CHARS]
        out.append(
            f'<details class="file" open><summary>{esc(name)}</summary>'
            f'<pre class="patch">{_coloured(patch, name)}</pre>{_note(cut)}</details>'
        )
    out.append("</section>")
    return "".join(out)


# -- validators -------------------------------------------------------------------------


def _validators(run_dir: Path) -> list[str]:
    folder = run_dir / "validation"
    if folder.is_symlink() or not folder.is_dir():
        return []
    names = [
        p.name[: -len(".json")]
        for p in folder.iterdir()
        if p.name.endswith(".json") and not p.name.endswith(".history.json")
    ]
    return sorted(names)


def _value(value: Any) -> str:
    if value is None:
        return "unjudged"
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _unsigned(who: Any, name: str, document: Mapping[str, Any]) -> str | None:
    """Why ``document`` is not a result trysquare signed here for run ``who`` (a measures row's
    id, cell and repetition) and validator ``name``; None when it is."""
    from trysquare.api import signature_problem

    if who is None:
        return "the run it belongs to is unknown"
    return signature_problem(who, name, document)


def _validator_section(run_dir: Path, name: str, who: Any = None) -> str:
    out = [f'<section class="validator"><h4>Validator {esc(name)}</h4>']
    text, note = _piece(run_dir, f"validation/{name}.json", 1_000_000)
    result: Any = None
    if text is not None and not note:
        try:
            result = json.loads(text)
        except ValueError:
            note = f"validation/{name}.json is not JSON"
    if isinstance(result, Mapping) and (why := _unsigned(who, name, result)) is not None:
        # Not trysquare's here: what it says is never shown as a result.
        note = f"validation/{name}.json: result not signed here ({why}); its numbers are not shown"
        result = None
    if not isinstance(result, Mapping):
        out.append(_note(note or f"validation/{name}.json is not a trysquare result"))
    else:
        state = str(result.get("state"))
        out.append(f'<p>state <b class="st-{esc(state)}">{esc(state)}</b>')
        if result.get("duration") is not None:
            out.append(f" · {esc(result.get('duration'))} s")
        out.append("</p>")
        if result.get("error"):
            out.append(f'<p class="error">error: {esc(result["error"])}</p>')
        metrics = found if isinstance(found := result.get("metrics"), Mapping) else {}
        reasons = found if isinstance(found := result.get("reasons"), Mapping) else {}
        if metrics or reasons:
            out.append(
                '<table class="metrics"><thead><tr><th>metric</th><th>value</th>'
                "<th>reason</th></tr></thead><tbody>"
            )
            for metric in sorted(set(metrics) | set(reasons)):
                value = metrics.get(metric, "(not recorded)")
                out.append(
                    f"<tr><td>{esc(metric)}</td><td>{esc(_value(value))}</td>"
                    f'<td class="reason">{esc(reasons.get(metric, ""))}</td></tr>'
                )
            out.append("</tbody></table>")
        spent = result_usage(result)
        if spent:
            out.append(f'<p class="usage">{esc(spent)}</p>')
    stderr, note = _piece(run_dir, f"validation/{name}.stderr", STDERR_TAIL_BYTES, tail=True)
    if stderr or note:  # a refused file is said, not left out silently
        shown_tail = _pre(stderr, "stderr") if stderr else ""
        out.append(f"<h5>stderr (tail)</h5>{_note(note)}{shown_tail}")
    transcript, note = _piece(run_dir, f"validation/{name}/transcript.json", TRANSCRIPT_READ_BYTES)
    if transcript is not None or note:
        usage = ""
        if transcript is not None and not note:
            try:
                parsed = json.loads(transcript)
            except ValueError:
                pass
            else:
                usage = judge_usage(parsed)
                transcript = json.dumps(parsed, indent=2, ensure_ascii=False)
        out.append(f"<h5>judge transcript</h5>{_note(note)}")
        if usage:
            out.append(f'<p class="usage">{esc(usage)}</p>')
        if transcript is not None:
            cut = ""
            if len(transcript) > TRANSCRIPT_CHARS:
                cut = (
                    f"showing {TRANSCRIPT_CHARS:,} of {len(transcript):,} characters; the whole "
                    f"transcript is {run_dir / 'validation' / name / 'transcript.json'}"
                )
                transcript = transcript[:TRANSCRIPT_CHARS]
            out.append(_pre(transcript, "transcript") + _note(cut))
    out.append(_history(run_dir, name, who))
    out.append("</section>")
    return "".join(out)


def result_usage(result: Mapping[str, Any]) -> str:
    """``spent: 2 request(s) · input tokens 1,200 (300 cached) · output tokens 80 · $0.00076``
    from a result's ``usage`` (what the judge recorded), or ``""`` when it has none."""
    from trysquare.api import cost_text, tokens_text, usage_of, usage_totals

    usage = usage_of(result)
    if usage is None:
        return ""
    totals = usage_totals(None, None, [usage])
    text = f"spent: {totals['requests']} request(s) \u00b7 input tokens {tokens_text(totals['input_tokens'])}"
    if totals["cached_tokens"]:
        text += f" ({totals['cached_tokens']:,} cached)"
    text += (
        f" \u00b7 output tokens {tokens_text(totals['output_tokens'])} \u00b7 {cost_text(totals)}"
    )
    if usage.get("provider") and usage.get("model"):
        text += f" \u00b7 {usage['provider']}/{usage['model']}"
    return text


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def judge_usage(transcript: Any) -> str:
    """``requests: 2 · tokens in 1,200 (300 cached) · out 80`` from a judge transcript, or ``""``.

    Every exchange is one request sent (a retry is a request too); tokens are
    what the provider reported in each reply's ``usage`` (OpenAI-style
    ``prompt_tokens``/``completion_tokens`` or ``input_tokens``/``output_tokens``).
    """
    exchanges = transcript.get("exchanges") if isinstance(transcript, Mapping) else None
    if not isinstance(exchanges, list):
        return ""
    tokens_in = tokens_out = cached = 0
    reported = False
    for exchange in exchanges:
        response = exchange.get("response") if isinstance(exchange, Mapping) else None
        body = response.get("body") if isinstance(response, Mapping) else None
        usage = body.get("usage") if isinstance(body, Mapping) else None
        if not isinstance(usage, Mapping):
            continue
        reported = True
        tokens_in += _count(usage.get("prompt_tokens", usage.get("input_tokens")))
        tokens_out += _count(usage.get("completion_tokens", usage.get("output_tokens")))
        details = usage.get("prompt_tokens_details") or usage.get("input_tokens_details")
        if isinstance(details, Mapping):
            cached += _count(details.get("cached_tokens"))
    text = f"requests: {len(exchanges)}"
    if reported:
        text += f" \u00b7 tokens in {tokens_in:,}"
        text += f" ({cached:,} cached)" if cached else ""
        text += f" \u00b7 out {tokens_out:,}"
    else:
        text += " \u00b7 no token usage reported"
    return text


def _history(run_dir: Path, name: str, who: Any = None) -> str:
    text, note = _piece(run_dir, f"validation/{name}.history.jsonl", HISTORY_READ_BYTES, tail=True)
    if text is None:
        return _note(note)
    lines = [line for line in text.splitlines() if line.strip()]
    items = []
    for line in lines[-HISTORY_SHOWN:]:
        try:
            entry = json.loads(line)
        except ValueError:
            items.append("<li>(an unreadable line)</li>")
            continue
        if isinstance(entry, Mapping) and _unsigned(who, name, entry) is not None:
            summary = "(a result not signed here: not shown)"
        elif isinstance(entry, Mapping):
            summary = f"{entry.get('state')}: {_value(entry.get('metrics'))}"
        else:
            summary = _value(entry)
        items.append(f"<li>{esc(summary)}</li>")
    head = f"<h5>result history ({len(lines)} earlier result(s), newest last)</h5>"
    return head + _note(note) + "<ol>" + "".join(items) + "</ol>"


# -- the panel --------------------------------------------------------------------------


@attrs.frozen
class _Who:
    """A run as a signature names it (its measures row's id, cell and repetition)."""

    id: Any
    cell: Any
    repetition: Any


def run_panel(
    index: int, row: Mapping[str, Any], run_dir: Path | None, *, open_: bool = False
) -> str:
    """The ``<details id="run-N">`` panel of one run (``N`` its place in the matrix)."""
    repetition = row.get("repetition")
    head = (
        f'<details class="run" id="run-{index}"{" open" if open_ else ""}>'
        f"<summary>run <code>{esc(row.get('id'))}</code> · cell {esc(row.get('cell'))} · "
        f"#{esc('?' if repetition is None else repetition)} · "
        f'<b class="st-{esc(row.get("state"))}">{esc(row.get("state"))}</b></summary>'
        '<div class="body">'
    )
    out = [head]
    if run_dir is not None:
        run_dir = Path(os.path.realpath(run_dir))
    for error in row.get("errors") or ():
        out.append(
            f'<p class="error">invalid: {esc(error.get("validator") or "run.toml")}: '
            f"{esc(error.get('error'))}</p>"
        )
    if run_dir is not None:
        out.append(f'<p class="note">folder: {esc(run_dir)}</p>')
    out.append(_diff_section(run_dir))
    response, note = _piece(run_dir, "response.md", RESPONSE_CHARS)
    out.append('<section class="response"><h4>Response</h4>' + _note(note))
    out.append(
        _pre(response, "response")
        if response is not None
        else ("" if note else '<p class="note">no response recorded</p>')
    )
    out.append("</section>")
    if run_dir is not None:
        who = _Who(row.get("id"), row.get("cell"), row.get("repetition"))
        for name in _validators(run_dir):
            out.append(_validator_section(run_dir, name, who))
    out.append("</div></details>")
    return "".join(out)
