"""The report's summary rows (report.py's `summary_rows`), hand-computed (eighth audit).

Throughput is the mean over the steps that recorded it, training step time their sum, reward and
success first and last, validation best and last with their steps, wall time last minus first.
"""

from __future__ import annotations

from beyondagent_plugin_report.report import summary_rows


def test_summary_rows_aggregate_each_metric_as_they_say() -> None:
    records = [
        {"step": 1, "time": 1000.0, "train/reward_mean": 0.125, "perf/tokens_per_s": 10.0, "perf/step_time_s": 30.0},
        {"step": 2, "time": 1065.0, "train/reward_mean": 0.5, "perf/tokens_per_s": 20.0, "perf/step_time_s": 40.0,
         "val/pass@1": 0.75},
        {"step": 3, "time": 1130.0, "train/reward_mean": 0.25, "perf/tokens_per_s": 60.0, "perf/step_time_s": 50.0,
         "val/pass@1": 0.5},
    ]
    rows = dict(summary_rows(records))
    assert rows["Throughput (mean)"] == "30.000 tokens/s"  # (10 + 20 + 60) / 3; the last step's is 60
    assert rows["Training step time (sum)"] == "2m 00s"
    assert rows["Wall time (first → last record)"] == "2m 10s"
    assert rows["Steps recorded"] == "3 (step 1 → 3)"
    assert rows["Train reward mean (first → last)"] == "0.125 → 0.250"
    assert rows["Val pass@1 (best / last)"] == "0.750 at step 2 / 0.500 at step 3"
    assert rows["Val reward mean (best / last)"] == "— (no evaluation recorded)"
    assert "Train success rate (first → last)" not in rows
