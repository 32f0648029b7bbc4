"""The README's quickstart spec resolves against the installed plugins (a dry run: no training)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def test_the_quickstart_spec_resolves() -> None:
    pytest.importorskip("beyondagent_plugin_gym")
    proc = subprocess.run([sys.executable, "-m", "beyondagent_core.cli", "run", "examples/quickstart.yaml", "--dry-run"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "beyondagent-plugin-torch" in proc.stdout and "beyondagent-plugin-gym" in proc.stdout
    assert "original tasks: 32" in proc.stdout and "val tasks: 16" in proc.stdout
