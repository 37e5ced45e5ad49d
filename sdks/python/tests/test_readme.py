"""The README's quick starts, run as written (in a fresh interpreter of the
same environment: under test.sh, the virtualenv with the built wheel)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def block(marker: str) -> str:
    text = README.read_text()
    m = re.search(rf"<!-- {marker} -->\s*```python\n(.*?)```", text, re.S)
    assert m, f"README.md has no {marker} block"
    return m.group(1)


@pytest.mark.parametrize("marker", ["quickstart-sync", "quickstart-async"])
def test_readme_quick_start_runs_as_written(server, marker, tmp_path):
    script = tmp_path / f"{marker}.py"
    script.write_text(block(marker))
    env = dict(os.environ, MSGMESH_KEY=server.key, MSGMESH_URL=server.url)
    r = subprocess.run([sys.executable, str(script)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "live:" in r.stdout, r.stdout
