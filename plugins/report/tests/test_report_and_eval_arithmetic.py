"""The report's and the eval's arithmetic at its edges, against hand-computed values (ninth audit,
class-wide: the eighth audit's survivors here were an aggregate computed the wrong way and
formulas checked away from their limits).

Eval (`eval/stats.py`):
- pass@j exactly where n - c = j (one failure set left to draw) and one past it;
- `pass_points` for k around the powers of two;
- the bootstrap's percentile indices: a statistic that counts its calls makes the sorted values
  0..samples-1, so the interval's ends are the indices themselves (24 and 975 of 1000); one task is
  not resampled, two are;
- the headline's mean turns and errors are per episode (not per task), `by_group` leaves out tasks
  without a group, a loss sweep's Elo is the sweep's, negated.

Report (`report.py`): records merged per step, key by key; series skip what is not a finite number;
the centred moving average and its window's bounds; the sampled steps and their cap; the best
validation score's first step on a tie; number and duration formats at their thresholds; where a
long turn is cut; the summary's Status row and the empty page.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from beyondagent_plugin_report import report
from beyondagent_plugin_report.eval.stats import (
    Sample,
    bootstrap,
    by_group,
    pass_at,
    pass_points,
    summarize,
)

# --- eval ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "c", "j", "expected"), [
    (5, 2, 3, 1 - 1 / math.comb(5, 3)),  # n - c == j: only one all-failure draw, 1 - 1/10
    (5, 1, 3, 1 - math.comb(4, 3) / math.comb(5, 3)),  # n - c > j: 1 - 4/10
    (5, 3, 3, 1.0),  # n - c < j: every draw holds a success
    (3, 0, 3, 0.0),  # j == n, no success
    (3, 1, 3, 1.0),
])
def test_pass_at_on_and_past_the_limit(n: int, c: int, j: int, expected: float) -> None:
    assert pass_at(n, c, j) == pytest.approx(expected)


def test_pass_at_j_of_n_samples_needs_j_at_most_n() -> None:
    assert pass_at(4, 0, 4) == 0.0
    with pytest.raises(ValueError, match="pass@5 needs at least 5 samples per task, got 4"):
        pass_at(4, 0, 5)


@pytest.mark.parametrize(("k", "points"), [(2, [1, 2]), (3, [1, 2, 3]), (4, [1, 2, 4]), (5, [1, 2, 4, 5]),
                                           (16, [1, 2, 4, 8, 16]), (17, [1, 2, 4, 8, 16, 17])])
def test_pass_points_are_one_the_powers_of_two_below_k_and_k(k: int, points: list[int]) -> None:
    assert pass_points(k) == points


def counting_statistic():
    """A statistic whose value is how many times it was called before: sorted, its values are 0..n-1."""
    calls = []

    def statistic(rows):
        calls.append(len(rows))
        return float(len(calls) - 1)
    return statistic, calls


def test_the_interval_ends_are_the_2_5th_and_97_5th_percentile_indices() -> None:
    statistic, calls = counting_statistic()
    rows = [{"n": 1}, {"n": 2}, {"n": 3}]
    assert bootstrap(rows, statistic) == (24.0, 975.0)  # int(0.025 * 999), ceil(0.975 * 999)
    assert len(calls) == 1000 and set(calls) == {3}  # each resample as many tasks as there are
    statistic, calls = counting_statistic()
    assert bootstrap(rows, statistic, samples=11) == (0.0, 10.0)  # int(0.25), ceil(9.75)
    assert len(calls) == 11


def test_one_task_is_not_resampled_two_are() -> None:
    statistic, calls = counting_statistic()
    assert bootstrap([{"n": 1}], statistic) == (0.0, 0.0) and len(calls) == 1
    statistic, calls = counting_statistic()
    bootstrap([{"n": 1}, {"n": 2}], statistic)
    assert len(calls) == 1000


def sample(task: str, index: int, *, success: bool = False, turns: int = 1, error: str | None = None,
           group: str | None = None, outcome: str | None = None) -> Sample:
    return Sample(task_id=task, origin="original", index=index, score=1.0 if success else 0.0, success=success,
                  turns=turns, error=error, group=group, outcome=outcome)


def test_mean_turns_and_errors_count_episodes_not_tasks() -> None:
    data = [sample("a", 0, turns=1), sample("b", 0, turns=5, error="boom"), sample("b", 1, turns=5),
            sample("b", 2, turns=5, error="boom")]
    summary = summarize(data, 3)
    assert summary["mean_turns"] == 4.0  # (1 + 15) / 4, not the tasks' (1 + 5) / 2
    assert summary["errors"] == 2 and summary["episodes"] == 4 and summary["tasks"] == 2
    assert summarize([], 3) == {"tasks": 0, "episodes": 0}


def test_by_group_leaves_out_tasks_without_a_group_and_sorts_the_groups() -> None:
    data = [sample("z1", 0, success=True, group="zeta"), sample("a1", 0, group="alpha"),
            sample("a2", 0, success=True, group="alpha"), sample("none", 0, success=True)]
    groups = by_group(data, 1)
    assert list(groups) == ["alpha", "zeta"]
    assert groups["alpha"]["pass@1"] == 0.5 and groups["alpha"]["tasks"] == 2 and groups["zeta"]["pass@1"] == 1.0
    assert by_group([sample("none", 0)], 1) == {}


def test_a_loss_sweep_is_the_win_sweep_negated_and_draws_count_half() -> None:
    losses = summarize([sample(f"t{i}", 0, outcome="loss") for i in range(4)], 1)
    assert losses["elo_vs_opponent"] == pytest.approx(-400 * math.log10(7))  # S held half a game above 0
    draws = summarize([sample("t0", 0, outcome="draw"), sample("t1", 0, outcome="draw"),
                       sample("t2", 0, success=True, outcome="win"), sample("t3", 0, outcome="draw")], 1)
    assert draws["elo_vs_opponent"] == pytest.approx(400 * math.log10(0.625 / 0.375))  # S = (1 + 3/2) / 4


# --- report ----------------------------------------------------------------------------------------


def test_records_merge_per_step_key_by_key_in_step_order() -> None:
    merged = report.merge_by_step([{"step": 2, "a": 1.0, "b": 2.0}, {"step": 1, "a": 0.5}, {"step": 2, "b": 3.0}])
    assert merged == [{"step": 1, "a": 0.5}, {"step": 2, "a": 1.0, "b": 3.0}]


def test_a_series_keeps_finite_numbers_only() -> None:
    records = [{"step": 1, "x": 1}, {"step": 2, "x": float("nan")}, {"step": 3, "x": "2"}, {"step": 4},
               {"step": 5, "x": float("inf")}, {"step": 6, "x": 0.0}]
    found = report.series(records, "x")
    assert (found.steps, found.values) == ([1, 6], [1.0, 0.0])
    assert not report.series(records, "y")


def test_the_moving_average_is_centred_with_fewer_points_at_the_ends() -> None:
    assert report.moving_average([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 3) == pytest.approx([1.5, 2, 3, 4, 5, 5.5])
    assert report.moving_average([0.0, 0.0, 9.0, 0.0, 0.0], 5) == pytest.approx([3, 2.25, 1.8, 2.25, 3])


@pytest.mark.parametrize(("count", "window"), [(1, 5), (59, 5), (60, 7), (70, 7), (100, 11), (500, 51),
                                               (509, 51), (510, 51), (10_000, 51)])
def test_the_window_is_odd_about_a_tenth_and_between_5_and_51(count: int, window: int) -> None:
    assert report.moving_average_window(count) == window


def test_the_first_and_last_sampled_steps_are_shown_three_episodes_each() -> None:
    samples = [{"step": step, "n": n} for step in (4, 2, 9, 6) for n in range(5)]
    picked = report.pick_samples(samples)
    assert [step for step, _ in picked] == [2, 9]
    assert [[s["n"] for s in chosen] for _, chosen in picked] == [[0, 1, 2], [0, 1, 2]]
    assert [step for step, _ in report.pick_samples([{"step": 3}])] == [3]  # one step: shown once
    assert report.pick_samples([]) == []


def test_the_best_validation_score_is_its_first_step_on_a_tie() -> None:
    rows = dict(report.summary_rows([{"step": 1, "val/pass@1": 0.25}, {"step": 2, "val/pass@1": 0.75},
                                     {"step": 3, "val/pass@1": 0.75}, {"step": 4, "val/pass@1": 0.5}]))
    assert rows["Val pass@1 (best / last)"] == "0.750 at step 2 / 0.500 at step 4"


@pytest.mark.parametrize(("value", "text"), [(100.0, "100"), (99.9994, "99.999"), (1234567.0, "1,234,567"),
                                             (-150.0, "-150"), (0.01, "0.010"), (0.00999, "9.99e-03"),
                                             (-0.005, "-5.00e-03"), (0.0, "0.000")])
def test_numbers_are_formatted_by_their_size(value: float, text: str) -> None:
    assert report._number(value) == text


@pytest.mark.parametrize(("seconds", "text"), [(0, "0s"), (-5, "0s"), (59.4, "59s"), (59.6, "1m 00s"),
                                               (61, "1m 01s"), (3600, "1h 00m 00s"), (3725, "1h 02m 05s")])
def test_durations_are_formatted_by_their_size(seconds: float, text: str) -> None:
    assert report._duration(seconds) == text


def test_a_long_turn_is_cut_where_it_says() -> None:
    limit = report.MAX_TURN_CHARS
    whole = report._turn_html({"role": "user", "content": "x" * limit})
    assert "more characters" not in whole and "x" * limit in whole
    cut = report._turn_html({"role": "user", "content": "x" * limit + "yz"})
    assert "… (2 more characters)" in cut and "y" not in cut.split("<pre>")[1].split("…")[0]


def test_a_stopped_runs_summary_says_so_and_a_run_without_steps_gets_the_empty_page(tmp_path: Path) -> None:
    page = report.render_page("r", tmp_path, [{"step": 1}], [], stopped="stopped at step 1 of 5 (SIGINT)")
    assert "<tr><th>Status</th><td>stopped at step 1 of 5 (SIGINT)</td></tr>" in page
    assert "The run did not finish: stopped at step 1 of 5 (SIGINT)." in page
    finished = report.render_page("r", tmp_path, [{"step": 1}], [])
    assert "Status" not in finished and "did not finish" not in finished and "No steps were recorded" not in finished
    assert "No steps were recorded" in report.render_page("r", tmp_path, [], [])
