"""`beyondagent eval`'s numbers where tasks differ (issue 37's fifth mutation audit): the 95% bootstrap
interval is as wide as the normal approximation says (about 1.96 standard errors each side), the
outcome rates average each task's share (a task with more samples does not weigh more), and pass@j is
reported only for the j every task has samples for."""

from __future__ import annotations

import math

import pytest

from beyondagent_plugin_report.eval.stats import Sample, summarize


def played(task: str, outcomes: list[str]) -> list[Sample]:
    return [Sample(task_id=task, origin="original", index=i, score=1.0 if o == "win" else 0.0, success=o == "win",
                   turns=1, outcome=o) for i, o in enumerate(outcomes)]


def test_the_interval_spans_about_two_standard_errors_each_side() -> None:
    data = [s for t in range(40) for s in played(f"t{t}", ["win" if t % 2 else "loss"])]
    summary = summarize(data, 1)
    low, high = summary["pass@1_ci95"]
    error = math.sqrt(0.5 * 0.5 / 40)  # the standard error of a mean of 40 tasks, half of them solved
    assert summary["pass@1"] == 0.5
    assert 0.5 - 2.5 * error < low < 0.5 - 1.5 * error and 0.5 + 1.5 * error < high < 0.5 + 2.5 * error


def test_outcome_rates_average_tasks_not_samples_and_pass_at_j_needs_j_samples_everywhere() -> None:
    data = played("a", ["win"]) + played("b", ["loss", "loss", "loss"])  # an eval cut short: a has one sample
    summary = summarize(data, 4)
    assert summary["win_rate"] == pytest.approx(0.5) and summary["loss_rate"] == pytest.approx(0.5)  # not 1/4, 3/4
    assert summary["pass@1"] == pytest.approx(0.5)
    assert not any(name in summary for name in ("pass@2", "pass@4"))  # a has too few samples for them


def test_the_elo_difference_follows_the_score_and_stays_finite_on_a_sweep() -> None:
    def games(outcomes: list[str]) -> list[Sample]:
        return [Sample(task_id=f"t{i}", origin="original", index=0, score=0.0, success=o == "win", turns=1,
                       outcome=o) for i, o in enumerate(outcomes)]

    even = summarize(games(["win", "loss", "draw", "draw"]), 1)
    assert even["elo_vs_opponent"] == pytest.approx(0.0)
    three_in_four = summarize(games(["win", "win", "win", "loss"]), 1)  # S = 0.75: 400 log10(3)
    assert three_in_four["elo_vs_opponent"] == pytest.approx(190.85, abs=0.01)
    sweep = summarize(games(["win"] * 4), 1)["elo_vs_opponent"]  # S held half a game below 1: 400 log10(7)
    assert sweep == pytest.approx(338.04, abs=0.01)
    low, high = summarize(games(["win", "win", "win", "loss"]), 1)["elo_vs_opponent_ci95"]
    assert low <= 190.85 <= high
    assert "elo_vs_opponent" not in summarize([Sample(task_id="t", origin="original", index=0, score=1.0,
                                                      success=True, turns=1)], 1)
