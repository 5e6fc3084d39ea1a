#!/usr/bin/env python3
import json
import sys
from pathlib import Path

context = json.loads(Path(sys.argv[1]).read_text())
repo = Path(context["repo"])
metrics = {"has_readme": (repo / "README.md").is_file()}
json.dump({"metrics": metrics, "reasons": {}}, sys.stdout)
