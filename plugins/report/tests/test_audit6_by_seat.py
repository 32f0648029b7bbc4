"""`beyondagent eval`'s per-seat numbers (stats.py's `by_seat`), by hand: only samples that played a seat of
a multi-seat episode are summed per seat; one-seat samples (seat None) are in the headline only, so a run
mixing both has exactly the seats it played, and one without seats has none."""

from __future__ import annotations

from beyondagent_plugin_report.eval.stats import Sample, by_seat, summarize


def sample(task: str, index: int, seat: int | None, outcome: str | None) -> Sample:
    score = {"win": 1.0, "draw": 0.5}.get(outcome or "", 0.0)
    return Sample(task_id=task, origin="original", index=index, score=score, success=score == 1.0, turns=2,
                  outcome=outcome, seat=seat)


def test_only_seated_samples_are_split_by_seat() -> None:
    seated = [sample("g", 0, 0, "win"), sample("g", 0, 1, "loss"), sample("g", 1, 0, "draw"),
              sample("g", 1, 1, "draw")]
    alone = [sample("solo", 0, None, None), sample("solo", 1, None, None)]
    seats = by_seat([*seated, *alone], 2)
    assert list(seats) == ["seat 0", "seat 1"]
    assert seats["seat 0"]["episodes"] == 2 and seats["seat 0"]["avg@2"] == 0.75
    assert seats["seat 1"]["episodes"] == 2 and seats["seat 1"]["avg@2"] == 0.25
    assert (seats["seat 0"]["win_rate"], seats["seat 0"]["draw_rate"]) == (0.5, 0.5)
    assert summarize([*seated, *alone], 2)["episodes"] == 6  # the headline has them all
    assert by_seat(alone, 2) == {}
