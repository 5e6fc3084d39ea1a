"""The clone every ``trysquare.git`` test starts from."""

from __future__ import annotations

from pathlib import Path

import pytest
from trysquare.testing import GitRepo

from tests.core.git.oracle import BASE_FILES


@pytest.fixture
def g(tmp_path: Path) -> GitRepo:
    repo = GitRepo.init(tmp_path / "clone", BASE_FILES)
    (repo.path / "run.sh").chmod(0o755)
    repo.commit("base with exec bit")
    repo.tag("etalon-v1")
    return repo
