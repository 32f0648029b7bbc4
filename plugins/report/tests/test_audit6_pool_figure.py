"""The report's opponent-pool panel (report.py's `_pool_figure`): the policy's Elo curve is `pool/elo` and
the best snapshot's is `pool/elo_best_snapshot`, the results panel draws the win, draw and loss shares
from their own metrics, and a run without a pool draws no panel."""

from __future__ import annotations

import pytest

pytest.importorskip("matplotlib")

from beyondagent_plugin_report.report import _pool_figure  # noqa: E402


def lines(axes) -> dict[str, list[float]]:
    return {line.get_label(): [float(y) for y in line.get_ydata()] for line in axes.get_lines()}


def test_the_pool_panel_draws_each_metric_where_it_belongs() -> None:
    records = [{"step": 1, "pool/elo": 1016.0, "pool/elo_best_snapshot": 1000.0, "pool/win_rate": 1.0,
                "pool/draw_rate": 0.0, "pool/loss_rate": 0.0},
               {"step": 2, "pool/elo": 1030.0, "pool/elo_best_snapshot": 990.0, "pool/win_rate": 0.5,
                "pool/draw_rate": 0.25, "pool/loss_rate": 0.25}]
    figure = _pool_figure(records)
    ratings, results = figure.axes[:2]
    assert lines(ratings) == {"policy": [1016.0, 1030.0], "best snapshot in the pool": [1000.0, 990.0]}
    assert lines(results) == {"won": [1.0, 0.5], "drawn": [0.0, 0.25], "lost": [0.0, 0.25]}
    assert _pool_figure([{"step": 1, "train/reward_mean": 0.5}]) is None
