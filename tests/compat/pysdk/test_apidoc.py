"""sdk/python/API.md is what tools/apidoc.py makes of the docstrings today."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT


def test_api_reference_is_current() -> None:
    tool = ROOT / "sdk" / "python" / "tools" / "apidoc.py"
    r = subprocess.run([sys.executable, str(tool), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
