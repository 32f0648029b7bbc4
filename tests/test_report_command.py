"""`beyondagent report RUN_DIR`: the report drawn again for any run directory, by the real CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from beyondagent_core.jsonl import append_jsonl


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "beyondagent_core.cli", *args], capture_output=True, text=True,
                          timeout=120)


def test_report_redraws_a_runs_page(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    append_jsonl(tmp_path / "metrics.jsonl", [{"step": s, "time": float(s), "train/reward_mean": s / 10}
                                              for s in range(1, 6)])
    proc = cli("report", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    page = (tmp_path / "report.html").read_text()
    assert proc.stdout.strip() == f"wrote {tmp_path / 'report.html'}" and "data:image/png;base64," in page


def test_a_directory_that_is_not_a_run_is_a_usage_error(tmp_path: Path) -> None:
    proc = cli("report", str(tmp_path))
    assert proc.returncode == 2 and "is not a run directory" in proc.stderr and "Traceback" not in proc.stderr


def test_a_bad_metrics_line_is_skipped_naming_the_file_and_line(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    metrics = tmp_path / "metrics.jsonl"
    lines = ['{"step": 1, "time": 1.0, "train/reward_mean": 0.1}',
             "[" * 100_000 + "]" * 100_000,  # was an internal error: RecursionError
             '{"step": 2, "big": ' + "9" * 5000 + "}",  # was an internal error: past Python's int digit limit
             '"a string"',
             '{"step": "3"}',
             '{"step": 4, "time": 4.0, "train/reward_mean": 0.4}']
    metrics.write_text("\n".join(lines) + "\n")
    proc = cli("report", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "internal error" not in proc.stderr
    for number, reason in ((2, "nested too deeply"), (3, "4300 digits"), (4, "not an object"), (5, "no integer")):
        line = next(line for line in proc.stderr.splitlines() if f"metrics.jsonl:{number}" in line)
        assert "metrics.bad_line" in line and reason in line and str(tmp_path) in line
    assert (tmp_path / "report.html").is_file()
