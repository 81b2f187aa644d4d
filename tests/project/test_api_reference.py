"""docs/api.md is what the docstrings say (scripts/api_reference.py), and every face name has a docstring."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_api_reference_is_current_and_complete():
    check = subprocess.run(
        [sys.executable, os.path.join(ROOT, "scripts", "api_reference.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert check.returncode == 0, check.stderr
    text = open(os.path.join(ROOT, "docs", "api.md"), encoding="utf-8").read()
    assert "(no docstring)" not in text and text.count("\n### ") >= 45
