"""The numbers `beyondagent eval` reports (beyondagent_plugin_report.eval.stats), against hand computations."""

from __future__ import annotations

import math

import pytest

from beyondagent_plugin_report.eval.stats import Sample, by_origin, pass_at, pass_points, summarize


def samples(task: str, outcomes: list[float], origin: str = "original", turns: int = 2) -> list[Sample]:
    return [Sample(task_id=task, origin=origin, index=i, score=o, success=o >= 1, turns=turns)
            for i, o in enumerate(outcomes)]


def test_pass_at_is_the_unbiased_estimator() -> None:
    assert pass_at(8, 0, 1) == 0 and pass_at(8, 8, 1) == 1
    assert pass_at(8, 2, 1) == pytest.approx(2 / 8)
    assert pass_at(8, 2, 4) == pytest.approx(1 - math.comb(6, 4) / math.comb(8, 4))  # = 1 - 15/70
    assert pass_at(4, 1, 4) == 1.0
    with pytest.raises(ValueError):
        pass_at(2, 1, 4)


def test_pass_points_cover_one_the_powers_of_two_and_k() -> None:
    assert pass_points(1) == [1] and pass_points(8) == [1, 2, 4, 8] and pass_points(6) == [1, 2, 4, 6]


def test_summary_of_two_tasks() -> None:
    data = samples("a", [1, 0, 0, 0]) + samples("b", [1, 1, 0.5, 0], turns=4)
    summary = summarize(data, 4)
    assert summary["avg@4"] == pytest.approx((0.25 + 0.625) / 2)
    assert summary["best@4"] == pytest.approx(1.0)
    assert summary["pass@1"] == pytest.approx((1 / 4 + 2 / 4) / 2)
    assert summary["pass@2"] == pytest.approx(((1 - math.comb(3, 2) / 6) + (1 - math.comb(2, 2) / 6)) / 2)
    assert summary["pass@4"] == 1.0 and summary["mean_turns"] == 3 and summary["tasks"] == 2
    low, high = summary["avg@4_ci95"]
    assert 0.25 <= low <= summary["avg@4"] <= high <= 0.625  # resampling two tasks stays between them


def test_the_interval_narrows_with_more_tasks_and_is_reproducible() -> None:
    few = [s for t in range(4) for s in samples(f"t{t}", [1, 0] if t % 2 else [0, 0])]
    many = [s for t in range(64) for s in samples(f"t{t}", [1, 0] if t % 2 else [0, 0])]
    width = lambda summary: summary["pass@1_ci95"][1] - summary["pass@1_ci95"][0]  # noqa: E731
    assert width(summarize(many, 2)) < width(summarize(few, 2))
    assert summarize(many, 2, seed=3) == summarize(many, 2, seed=3)


def test_by_origin_splits_the_summary() -> None:
    data = samples("a", [1, 1]) + samples("s", [0, 0], origin="synthetic")
    split = by_origin(data, 2)
    assert split["original"]["pass@1"] == 1 and split["synthetic"]["pass@1"] == 0


def test_against_an_opponent_the_win_draw_and_loss_rates_are_reported() -> None:
    def played(task: str, outcomes: list[str]) -> list[Sample]:
        return [Sample(task_id=task, origin="original", index=i, score={"win": 1.0, "draw": 0.5}.get(o, 0.0),
                       success=o == "win", turns=3, outcome=o) for i, o in enumerate(outcomes)]

    summary = summarize(played("a", ["win", "win", "loss", "draw"]) + played("b", ["loss", "loss", "loss", "win"]), 4)
    assert summary["win_rate"] == pytest.approx((2 / 4 + 1 / 4) / 2) == summary["pass@1"]  # a win is a success
    assert summary["draw_rate"] == pytest.approx(1 / 8) and summary["loss_rate"] == pytest.approx((1 / 4 + 3 / 4) / 2)
    assert summary["win_rate"] + summary["draw_rate"] + summary["loss_rate"] == pytest.approx(1.0)
    low, high = summary["win_rate_ci95"]
    assert 0.25 <= low <= summary["win_rate"] <= high <= 0.5
    cut = summarize(played("c", ["win", "unfinished"]), 2)  # an outcome of another name is reported too
    assert cut["unfinished_rate"] == 0.5 and cut["draw_rate"] == 0.0
    assert not any(name.endswith("_rate") for name in summarize(samples("a", [1, 0]), 2))  # no opponent: none
