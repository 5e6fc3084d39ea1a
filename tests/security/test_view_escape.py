"""Issue 15: the HTML report shows the agent's text as text and reads nothing outside a run.

The hostile run is built at test time (tests/view/viewlab.py): markup in a file
name, a reason, an error, the response, a judge transcript, a stderr tail and a
cell name; a response that is a symlink to a secret outside the run folder.
"""

from __future__ import annotations

from pathlib import Path

from trysquare_view.page import SCRIPT, build_page

from tests.view.test_view_html import parse
from tests.view.viewlab import SECRET, build_lab, source_of

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare_view.page", "trysquare_view.panel")


def test_view_markup_in_file_name_reason_response_and_cell_stays_text(tmp_path: Path) -> None:
    page = build_page(source_of(build_lab(tmp_path)))
    tags = parse(page)
    scripts = [attrs for tag, attrs in tags.tags if tag == "script"]
    assert len(scripts) == 1  # ours, and only ours
    assert page.count("<script>") == 1 and page.count(SCRIPT) == 1
    assert not [tag for tag, _ in tags.tags if tag == "img"]
    handlers = [(tag, name) for tag, attrs in tags.tags for name in attrs if name.startswith("on")]
    assert handlers == []
    text = "".join(tags.text)
    assert "<script>document.title='pwned'</script>" in text  # shown, as text
    assert "<img src=x onerror=alert(1)>.py" in text


def test_view_response_symlink_to_a_secret_is_not_embedded(tmp_path: Path) -> None:
    lab = build_lab(tmp_path)
    page = build_page(source_of(lab))
    assert SECRET not in page
    assert "not shown: response.md is a symlink; not followed" in page


def test_view_symlinked_validation_folder_is_not_followed(tmp_path: Path) -> None:
    lab = build_lab(tmp_path)
    run = lab.root / "runs" / "evil-3"
    outside = tmp_path / "outside" / "validation"
    outside.mkdir()
    (outside / "leak.json").write_text(f'{{"state": "valid", "metrics": {{"k": "{SECRET}"}}}}')
    (outside / "leak.stderr").write_text(SECRET)
    import shutil

    shutil.rmtree(run / "validation")
    (run / "validation").symlink_to(outside)
    page = build_page(source_of(lab))
    assert SECRET not in page


def test_view_diff_colouring_escapes_every_token() -> None:
    from trysquare_view.panel import _coloured

    hostile = (
        "+x = '<script>a</script>'  # <img src=x onerror=alert(1)>\n<script>b</script>\n-\"<b>\""
    )
    for name in ("a.py", "a.js", "a.txt", "a.sh"):
        coloured = _coloured(hostile, name)
        assert "<script>" not in coloured and "<img" not in coloured and "<b>" not in coloured
        assert "&lt;script&gt;" in coloured


def test_view_hard_linked_stderr_to_a_secret_is_not_embedded(tmp_path: Path) -> None:
    # Issue 29 item 6: a second name for a file outside the run reads as the run's own file.
    import os

    lab = build_lab(tmp_path)
    stderr = lab.root / "runs" / "evil-3" / "validation" / "check.stderr"
    stderr.unlink(missing_ok=True)
    os.link(tmp_path / "outside" / "id_rsa", stderr)
    page = build_page(source_of(lab))
    assert SECRET not in page
    assert "check.stderr has 2 links" in page
