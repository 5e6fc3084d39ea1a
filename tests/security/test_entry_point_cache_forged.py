"""The agent's code cannot forge trysquare's cache of the installed plugins.

trysquare keeps what it found in the ``trysquare`` entry points in its own cache
(``$XDG_CACHE_HOME/trysquare/entry-points-*.json``) and loads the modules named there: a
forged entry would be code of the agent's choosing run by trysquare itself, a dropped one a
plugin (a judge guarding its provider's key) left out. The agent's test code tries to add
an entry; in the jail the cache is not in its view, and trysquare's next start finds only the
real plugins. With the jail and the sandbox off the same attack works (the tests can fail).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from trysquare import _entry_points, jail, plugins

from tests.security.test_jail import _attack, _validate, where  # noqa: F401 - a fixture

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare._entry_points", "trysquare.jail")

pytestmark = pytest.mark.skipif(
    not jail.availability().available, reason=f"no jail here: {jail.availability().reason}"
)


def test_the_agents_code_cannot_add_a_plugin_to_trysquares_entry_point_cache(
    tmp_path: Path, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_entry_points, "_SETTLED_SECONDS", 0.0)
    _entry_points.scan()
    cache = _entry_points.cache_file()
    assert Path(cache).is_file()
    body = f"""
import json
with open({cache!r}) as handle:
    data = json.load(handle)
data["entry_points"].append(["trysquare", "forged", "os", "forged", "1", []])
with open({cache!r}, "w") as handle:
    handle.write(json.dumps(data))
"""
    _attack(tmp_path, body)
    recorded = _validate(tmp_path)
    plugins.reset()
    names = {item.name for item in _entry_points.scan()}
    if where == "jail":
        assert recorded["metrics"] == {"tests": False}, recorded
        assert "forged" not in names
        assert "forged" not in json.loads(Path(cache).read_text())["entry_points"][-1]
    else:
        assert recorded["metrics"] == {"tests": True}, recorded
        assert "forged" in names
