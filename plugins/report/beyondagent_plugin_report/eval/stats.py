"""The numbers `beyondagent eval` reports, from k scored samples per task.

Per task with n samples, c of them successful and scores s_1..s_n:

- avg@k: the mean score, averaged over tasks; best@k: the best score of the task's samples;
- pass@j (Chen et al., 2021, the unbiased estimator): 1 - C(n - c, j) / C(n, j), the chance
  that at least one of j samples drawn without replacement from the n succeeds; pass@1 is the
  success rate;
- turns: the mean number of model turns per episode; errors: episodes that failed to run;
- against an opponent (an env whose rewards' details name an `opponent` and an `outcome`: TextArena's
  two-player games),
  win_rate, draw_rate, loss_rate (and any other outcome's): each task's share of its samples,
  averaged over tasks; and elo_vs_opponent, the Elo difference that score gives the policy over its
  opponent (400 log10(S / (1 - S)), S = win_rate + draw_rate / 2; 0: as strong; +200: wins 76%).

`by_group` gives the same numbers per group of tasks, a task's group being its
`metadata["eval_group"]` (the `bfcl` task source sets it to BFCL's category, so an eval
reports BFCL's accuracy, pass@1, per category). In a multi-seat episode (self-play) each seat is a
sample of its task (the headline mixes both sides of each game) and `by_seat` gives each seat's own.

Confidence intervals are 95% percentile bootstraps over tasks (the unit that was sampled),
seeded so a report is reproducible. Pure Python: no numpy needed.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Sequence
from typing import Any

import attrs

BOOTSTRAP_SAMPLES = 1000


@attrs.frozen
class Sample:
    """One evaluated episode."""

    task_id: str
    origin: str
    index: int
    score: float
    success: bool
    turns: int
    error: str | None = None
    group: str | None = None  # the task's metadata["eval_group"], when it has one
    outcome: str | None = None  # the reward's details["outcome"] (win, draw, loss), against an opponent
    seat: int | None = None  # the seat it played in a multi-seat episode (self-play)


def pass_at(n: int, c: int, j: int) -> float:
    """The unbiased pass@j of a task with c successes in n samples (j <= n)."""
    if j > n:
        raise ValueError(f"pass@{j} needs at least {j} samples per task, got {n}")
    if n - c < j:
        return 1.0
    return 1.0 - math.comb(n - c, j) / math.comb(n, j)


def pass_points(k: int) -> list[int]:
    """The j of pass@j worth reporting for k samples: 1, powers of two below k, and k."""
    points = {1, k}
    j = 2
    while j < k:
        points.add(j)
        j *= 2
    return sorted(points)


def per_task(samples: Sequence[Sample]) -> dict[str, list[Sample]]:
    tasks: dict[str, list[Sample]] = {}
    for sample in samples:
        tasks.setdefault(sample.task_id, []).append(sample)
    return tasks


def task_row(task_id: str, samples: Sequence[Sample]) -> dict[str, Any]:
    scores = [s.score for s in samples]
    return {"task_id": task_id, "origin": samples[0].origin, "n": len(samples),
            "successes": sum(s.success for s in samples), "mean_score": statistics.fmean(scores),
            "best_score": max(scores), "mean_turns": statistics.fmean(s.turns for s in samples),
            "errors": sum(s.error is not None for s in samples),
            "outcomes": {o: sum(s.outcome == o for s in samples) for o in sorted({s.outcome for s in samples} - {None})}}


OUTCOMES = ("win", "draw", "loss")


def outcome_names(samples: Sequence[Sample]) -> list[str]:
    """The outcomes to report: win, draw, loss and any other seen; none when no sample has one."""
    seen = {s.outcome for s in samples} - {None}
    return [*OUTCOMES, *sorted(seen - set(OUTCOMES))] if seen else []


def summarize(samples: Sequence[Sample], k: int, *, seed: int = 0) -> dict[str, Any]:
    """The headline numbers over `samples` (k per task), with bootstrap intervals."""
    tasks = per_task(samples)
    if not tasks:
        return {"tasks": 0, "episodes": 0}
    rows = [task_row(task_id, group) for task_id, group in tasks.items()]
    points = [j for j in pass_points(k) if all(row["n"] >= j for row in rows)]

    def metric(name: str) -> Callable[[list[dict[str, Any]]], float]:
        if name == f"avg@{k}":
            return lambda chosen: statistics.fmean(row["mean_score"] for row in chosen)
        if name == f"best@{k}":
            return lambda chosen: statistics.fmean(row["best_score"] for row in chosen)
        if name.endswith("_rate"):
            outcome = name.removesuffix("_rate")
            return lambda chosen: statistics.fmean(row["outcomes"].get(outcome, 0) / row["n"] for row in chosen)
        if name == "elo_vs_opponent":
            return lambda chosen: elo_difference(chosen)
        j = int(name.split("@")[1])
        return lambda chosen: statistics.fmean(pass_at(row["n"], row["successes"], j) for row in chosen)

    outcomes = outcome_names(samples)
    names = [f"avg@{k}", f"best@{k}", *(f"pass@{j}" for j in points), *(f"{outcome}_rate" for outcome in outcomes),
             *(["elo_vs_opponent"] if outcomes else [])]
    summary: dict[str, Any] = {"tasks": len(rows), "episodes": len(samples),
                               "errors": sum(s.error is not None for s in samples),
                               "mean_turns": statistics.fmean(s.turns for s in samples)}
    for name in names:
        value = metric(name)(rows)
        low, high = bootstrap(rows, metric(name), seed=seed)
        summary[name] = value
        summary[f"{name}_ci95"] = [low, high]
    return summary


def elo_difference(rows: Sequence[dict[str, Any]]) -> float:
    """The Elo rating the games' score gives the policy above its opponent: 400 log10(S / (1 - S)), S the
    mean of (wins + draws / 2) / n over tasks, kept within half a game of 0 and 1 (a sweep is not infinite)."""
    games = sum(row["n"] for row in rows)
    score = statistics.fmean((row["outcomes"].get("win", 0) + 0.5 * row["outcomes"].get("draw", 0)) / row["n"]
                             for row in rows)
    edge = 0.5 / max(games, 1)
    score = min(max(score, edge), 1.0 - edge)
    return 400.0 * math.log10(score / (1.0 - score))


def bootstrap(rows: list[dict[str, Any]], statistic: Callable[[list[dict[str, Any]]], float], *,
              seed: int = 0, samples: int = BOOTSTRAP_SAMPLES) -> tuple[float, float]:
    """The 2.5th and 97.5th percentiles of `statistic` over task sets resampled with replacement."""
    if len(rows) < 2:
        value = statistic(rows)
        return value, value
    rng = random.Random(seed)
    values = sorted(statistic([rng.choice(rows) for _ in rows]) for _ in range(samples))
    return values[int(0.025 * (samples - 1))], values[int(math.ceil(0.975 * (samples - 1)))]


def by_group(samples: Sequence[Sample], k: int, *, seed: int = 0) -> dict[str, dict[str, Any]]:
    """`summarize` per `eval_group` (tasks without one are left out; {} when none has one)."""
    groups: dict[str, list[Sample]] = {}
    for sample in samples:
        if sample.group is not None:
            groups.setdefault(sample.group, []).append(sample)
    return {group: summarize(chosen, k, seed=seed) for group, chosen in sorted(groups.items())}


def by_seat(samples: Sequence[Sample], k: int, *, seed: int = 0) -> dict[str, dict[str, Any]]:
    """`summarize` per seat of multi-seat episodes (`seat 0`, `seat 1`, ...; {} when none has seats): in
    self-play the headline mixes both sides of each game, each seat's numbers tell them apart."""
    seats: dict[int, list[Sample]] = {}
    for sample in samples:
        if sample.seat is not None:
            seats.setdefault(sample.seat, []).append(sample)
    return {f"seat {seat}": summarize(chosen, k, seed=seed) for seat, chosen in sorted(seats.items())}


def by_origin(samples: Sequence[Sample], k: int, *, seed: int = 0) -> dict[str, dict[str, Any]]:
    origins: dict[str, list[Sample]] = {}
    for sample in samples:
        origins.setdefault(sample.origin, []).append(sample)
    return {origin: summarize(group, k, seed=seed) for origin, group in sorted(origins.items())}
