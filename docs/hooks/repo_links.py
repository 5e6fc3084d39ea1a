"""An mkdocs hook: pages may link to the repository's other Markdown files (and examples).

The pages under ``docs/`` link to files beside them in the repository, as GitHub shows them
(``../plugins/trysquare-dask/README.md``, ``../examples/scenario.toml``). mkdocs only knows
``docs/``, so such a link would be "not found" (an error under ``--strict``). This hook copies
each repository file a page links to into the site under ``repo/`` (a Markdown file becomes a
page, whose own links are followed the same way) and rewrites the link to that copy. A link to a
file that does not exist is left alone, so ``--strict`` still reports it.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

# [text](target) and ![alt](target), with an optional "title"; the target has no spaces.
_LINK = re.compile(r"(\]\()([^)\s#]+)((?:#[^)\s]*)?(?:\s+\"[^\"]*\")?\))")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
_PREFIX = "repo"


def _root(config: Any) -> Path:
    return Path(config["config_file_path"]).resolve().parent


def _docs(config: Any) -> Path:
    return Path(config["docs_dir"]).resolve()


def _site_uri(real: Path, config: Any) -> str | None:
    """Where the file at ``real`` lives in the site, or None when it is outside the repository."""
    docs, root = _docs(config), _root(config)
    if real.is_relative_to(docs):
        return real.relative_to(docs).as_posix()
    if real.is_relative_to(root):
        return f"{_PREFIX}/{real.relative_to(root).as_posix()}"
    return None


def _real_path(src_uri: str, config: Any) -> Path:
    if src_uri.startswith(f"{_PREFIX}/"):
        return _root(config) / src_uri[len(_PREFIX) + 1 :]
    return _docs(config) / src_uri


def _targets(markdown: str, page: Path) -> list[tuple[str, Path]]:
    """The relative links of ``markdown`` (outside fenced code) with the file each names."""
    found = []
    for match in _LINK.finditer(_FENCE.sub("", markdown)):
        target = match.group(2)
        if "://" in target or target.startswith(("/", "mailto:")):
            continue
        found.append((target, (page.parent / target).resolve()))
    return found


def _nav_uris(nav: Any) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, dict):
        return [uri for value in nav.values() for uri in _nav_uris(value)]
    if isinstance(nav, list):
        return [uri for item in nav for uri in _nav_uris(item)]
    return []


def on_files(files: Files, config: Any) -> Files:
    """Add every repository file a page links to (followed through added pages) to the site."""
    queue = [_real_path(f.src_uri, config) for f in files.documentation_pages()]
    seen = set(queue)
    # Repository pages the nav names are added even when no page links to them.
    for uri in _nav_uris(config["nav"] or []):
        real = _real_path(uri, config)
        if uri.startswith(f"{_PREFIX}/") and real.is_file() and real not in seen:
            seen.add(real)
            files.append(File.generated(config, uri, abs_src_path=str(real)))
            queue.append(real)
    while queue:
        page = queue.pop()
        for _, real in _targets(page.read_text(encoding="utf-8"), page):
            uri = _site_uri(real, config)
            if (
                real in seen
                or uri is None
                or not uri.startswith(f"{_PREFIX}/")
                or not real.is_file()
            ):
                continue
            seen.add(real)
            files.append(File.generated(config, uri, abs_src_path=str(real)))
            if real.suffix == ".md":
                queue.append(real)
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """Point each link at the copy of its file inside the site."""
    here = _real_path(page.file.src_uri, config)
    page_dir = posixpath.dirname(page.file.src_uri)

    def rewrite(match: re.Match[str]) -> str:
        target = match.group(2)
        if "://" in target or target.startswith(("/", "mailto:")):
            return match.group(0)
        uri = _site_uri((here.parent / target).resolve(), config)
        if uri is None or files.get_file_from_path(uri) is None:
            return match.group(0)  # left for mkdocs to judge (and, if broken, to report)
        return f"{match.group(1)}{posixpath.relpath(uri, page_dir or '.')}{match.group(3)}"

    # Fenced code is shown as written: only prose links are rewritten.
    parts, last = [], 0
    for fence in _FENCE.finditer(markdown):
        parts.append(_LINK.sub(rewrite, markdown[last : fence.start()]))
        parts.append(fence.group(0))
        last = fence.end()
    parts.append(_LINK.sub(rewrite, markdown[last:]))
    return "".join(parts)
