"""The win/draw/loss rates of a run against an opponent (`trainer.outcome_metrics`): only rewards whose
details name an `opponent` are games; an env's own `outcome` (FrozenLake's success, failed,
out_of_steps) is not, and makes no rate (nor overwrites `success_rate`)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from beyondagent_plugin_torch.trainer import outcome_metrics

from beyondagent_core.types import Reward


def episode(details: dict, seat: int | None = None) -> Any:
    return SimpleNamespace(trajectory=SimpleNamespace(reward=Reward(score=1.0, success=True, details=details)),
                           seat=seat)


def test_an_outcome_without_an_opponent_is_no_game_result() -> None:
    assert outcome_metrics("val", [episode({"outcome": "success"}), episode({"outcome": "failed"})]) == {}
    played = outcome_metrics("val", [episode({"outcome": "win", "opponent": "random"}),
                                     episode({"outcome": "loss", "opponent": "random"})])
    assert played == {"val/win_rate": 0.5, "val/draw_rate": 0.0, "val/loss_rate": 0.5}
    cut = outcome_metrics("train", [episode({"outcome": "unfinished", "opponent": "llm"})])
    assert cut["train/unfinished_rate"] == 1.0 and cut["train/win_rate"] == 0.0


def test_self_play_reports_each_seats_rates_besides_both_sides_together() -> None:
    games = [("win", "loss"), ("win", "loss"), ("draw", "draw"), ("loss", "win")]  # the opener wins 2 of 4
    episodes = [episode({"outcome": outcome, "opponent": "self", "seat": seat}, seat)
                for game in games for seat, outcome in enumerate(game)]
    metrics = outcome_metrics("train", episodes)
    assert metrics["train/win_rate"] == metrics["train/loss_rate"] == 3 / 8 and metrics["train/draw_rate"] == 0.25
    assert (metrics["train/seat0_win_rate"], metrics["train/seat0_draw_rate"], metrics["train/seat0_loss_rate"]) \
        == (0.5, 0.25, 0.25)
    assert (metrics["train/seat1_win_rate"], metrics["train/seat1_loss_rate"]) == (0.25, 0.5)
