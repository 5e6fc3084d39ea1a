"""Every Python and shell block in README.md, CONTRIBUTING.md and docs/*.md runs as written.

A page's blocks run in order, in a fresh folder holding the shipped example (`scenario.toml`,
`validator.py`, ... and `runs/`, its matrix built with real git): Python blocks in one namespace
in this process, shell blocks with bash (`set -euo pipefail`), where `uv run CMD` is `CMD` in this
environment. A block that cannot run says why on the line before its fence:

    <!-- not-run: the reason -->

A Python block marked so is still compiled, so its syntax is checked. Untagged blocks (a command's
synopsis, an output, a tree) and other languages (toml, json) are text and are not run.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

ROOT = Path(__file__).resolve().parents[2]
PYTHON = {"python", "py", "python3"}
SHELL = {"sh", "bash", "shell", "console"}
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[\w+-]*)[^\n]*$")
_MARKER = re.compile(r"^\s*<!--\s*not-run\s*:\s*(?P<reason>.*?)\s*-->\s*$")
_ANY_MARKER = re.compile(r"<!--\s*not-run\b")


@attrs.frozen
class Block:
    """One fenced block of a page."""

    page: Path
    line: int  # of the opening fence, 1-based
    lang: str
    code: str
    not_run: str | None  # the reason, when marked


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of ``page``, each with the reason it is not run (or None)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    number = 0
    while number < len(lines):
        opening = _FENCE.match(lines[number])
        if opening is None:
            number += 1
            continue
        indent, fence = opening["indent"], opening["fence"]
        body: list[str] = []
        end = number + 1
        closing = re.compile(re.escape(fence[0]) + f"{{{len(fence)},}}")  # as long or longer
        while end < len(lines) and not closing.fullmatch(lines[end].strip()):
            body.append(lines[end].removeprefix(indent))
            end += 1
        previous = next((lines[i] for i in range(number - 1, -1, -1) if lines[i].strip()), "")
        marker = _MARKER.match(previous)
        found.append(
            Block(
                page,
                number + 1,
                opening["lang"].lower(),
                "\n".join(body) + "\n",
                marker["reason"] if marker else None,
            )
        )
        number = end + 1
    return found


def stray_markers(page: Path) -> int:
    """How many `not-run` markers of ``page``'s prose stand before no fence."""
    page_blocks = blocks(page)
    lines = page.read_text(encoding="utf-8").splitlines()
    inside = {n for b in page_blocks for n in range(b.line - 1, b.line + b.code.count("\n") + 1)}
    markers = sum(len(_ANY_MARKER.findall(line)) for n, line in enumerate(lines) if n not in inside)
    return markers - sum(1 for b in page_blocks if b.not_run is not None)


def pages() -> list[Path]:
    return [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]


def runnable(page: Path) -> list[Block]:
    return [b for b in blocks(page) if b.lang in PYTHON | SHELL and b.not_run is None]


def build_example(folder: Path) -> Path:
    """The shipped example's files in ``folder``, with its matrix built under ``folder/runs``."""
    from trysquare.demo import build_matrix, find_examples

    examples = find_examples()
    build_matrix(examples, folder)  # creates the folder
    for file in examples.iterdir():
        if file.is_file():
            shutil.copy2(file, folder / file.name)  # keeps validator.py's run bit
    return folder


def run_blocks(page_blocks: list[Block], folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run ``page_blocks`` in order in ``folder``; fail naming the page and line of the first to fail."""
    monkeypatch.chdir(folder)
    namespace: dict[str, object] = {"__name__": "__docs__"}
    venv_bin = str(Path(sys.executable).parent)
    # `uv run CMD` means CMD in the environment the suite runs in: no second install, no network.
    prelude = 'set -euo pipefail\nuv() { if [ "$1" = run ]; then shift; "$@"; else command uv "$@"; fi; }\n'
    for block in page_blocks:
        shown = block.page.relative_to(ROOT) if block.page.is_relative_to(ROOT) else block.page.name
        where = f"{shown}:{block.line}"
        if block.lang in PYTHON:
            try:
                exec(compile(block.code, where, "exec"), namespace)  # noqa: S102 - the documentation's own blocks, run as a reader would
            except Exception as error:  # any failure of a documented block is the page's bug
                pytest.fail(f"{where}: the Python block raised {type(error).__name__}: {error}")
        else:
            done = subprocess.run(
                ["bash", "-c", prelude + block.code],
                cwd=folder,
                env={**os.environ, "PATH": os.pathsep.join([venv_bin, os.environ.get("PATH", "")])},
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
            assert done.returncode == 0, (
                f"{where}: the shell block exited {done.returncode}\n{done.stdout}{done.stderr}"
            )


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example, built once; each page gets its own copy (a copy costs far less than git)."""
    return build_example(tmp_path_factory.mktemp("docs-example") / "work")


@pytest.mark.parametrize("page", [p for p in pages() if runnable(p)], ids=lambda p: p.name)
def test_the_blocks_of_a_page_run(
    page: Path, example: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "work"
    shutil.copytree(example, folder, symlinks=True)
    run_blocks(runnable(page), folder, monkeypatch)


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.name)
def test_a_block_not_run_says_why_and_still_compiles(page: Path) -> None:
    page_blocks = blocks(page)
    marked = [b for b in page_blocks if b.not_run is not None]
    for block in marked:
        assert block.not_run, f"{page.name}:{block.line}: `<!-- not-run: -->` needs a reason"
        if block.lang in PYTHON:
            compile(block.code, f"{page.name}:{block.line}", "exec")
    # A marker that is not right before a fence marks nothing: a slip to report, not to ignore.
    assert stray_markers(page) == 0, (
        f"{page.name}: a `<!-- not-run: ... -->` is not right before a fence"
    )


# The harness itself, on small pages, so a broken reader cannot pass every page vacuously.

PAGE = """\
# A page

```python
x = 1
```

<!-- not-run: needs a judge server -->
```python
call_the_judge()
```

1. A list item:

   ```sh
   test -f scenario.toml
   ```

```toml
not = "run"
```

````markdown
```python
shown_not_run()
```
````
"""


def test_blocks_reads_languages_markers_and_indented_fences(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(PAGE, encoding="utf-8")
    found = blocks(page)
    assert [(b.lang, b.line, b.not_run) for b in found] == [
        ("python", 3, None),
        ("python", 8, "needs a judge server"),
        ("sh", 14, None),
        ("toml", 18, None),
        ("markdown", 22, None),
    ]
    assert found[2].code == "test -f scenario.toml\n"
    assert [b.line for b in runnable(page)] == [3, 14]
    assert stray_markers(page) == 0
    page.write_text(PAGE + "\n<!-- not-run: before nothing -->\n\nSome prose.\n", encoding="utf-8")
    assert stray_markers(page) == 1


def test_a_failing_block_fails_naming_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# P\n\n```python\nx = 1\n```\n\n```python\nassert x == 2, 'x'\n```\n", encoding="utf-8"
    )
    with pytest.raises(
        pytest.fail.Exception, match=r"page.md:7: the Python block raised AssertionError"
    ):
        run_blocks(blocks(page), tmp_path, monkeypatch)
    page.write_text("# P\n\n```sh\nuv run python -c 'raise SystemExit(3)'\n```\n", encoding="utf-8")
    with pytest.raises(AssertionError, match=r"page.md:3: the shell block exited 3"):
        run_blocks(blocks(page), tmp_path, monkeypatch)
