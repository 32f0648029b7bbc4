"""A run's report page is asked of the plugin that draws it (`beyondagent_core.reports`, the
`beyondagent_write_report` hook): beyondagent-plugin-report draws report.html; without a plugin that
answers there is no page and no error."""

from __future__ import annotations

from pathlib import Path

import pytest

from beyondagent_core.jsonl import append_jsonl
from beyondagent_core.reports import write_run_report


def a_run_dir(tmp_path: Path) -> Path:
    for step in (1, 2):
        append_jsonl(tmp_path / "metrics.jsonl", [{"step": step, "time": float(step), "train/reward_mean": 0.1 * step,
                                                   "train/success_rate": 0.5}])
    return tmp_path


def test_without_a_report_plugin_there_is_no_page(plugin_manager, tmp_path: Path) -> None:
    assert write_run_report(plugin_manager, a_run_dir(tmp_path), title="r") is None
    assert not (tmp_path / "report.html").exists()


@pytest.mark.beyondagent_plugins("report")
def test_the_report_plugin_draws_the_page_with_where_a_run_stopped(plugin_manager, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    page = write_run_report(plugin_manager, a_run_dir(tmp_path), title="r", stopped="stopped at step 2 of 5")
    assert page == tmp_path / "report.html"
    assert "stopped at step 2 of 5" in page.read_text()
