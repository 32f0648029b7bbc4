"""examples/textarena_hanoi.yaml runs as it is (shrunk to one step), with the game in this process and
behind a launched environment service (`env.service: launch`, beyondagent-plugin-envservice): the
torch backend trains on what the games answered, and the records show the games' own verdicts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "textarena_hanoi.yaml"
ONE_STEP = ("backend.total_steps=1", "backend.batch_size=2", "algorithm.group_size=2", "tasks.train.count=2",
            "tasks.val.count=1", "workflow.max_turns=3", "backend.eval_every=0", "logging.episodes=all")


@pytest.mark.beyondagent_plugins("textarena", "torch", "mixers", "envservice")
@pytest.mark.parametrize("service", ["local", "launch"])
def test_the_example_trains_a_step_on_the_games(run_spec: Any, monkeypatch: pytest.MonkeyPatch, service: str) -> None:
    monkeypatch.setenv("BEYONDAGENT_PLUGINS", "textarena")  # what a launched server loads (and its own plugin)
    run = run_spec(EXAMPLE, *ONE_STEP, f"env.service={service}", f"run.name=hanoi-{service}")
    lines = [json.loads(x) for x in (run.run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
    step = next(line for line in lines if line.get("step") == 1 and "train/reward_mean" in line)
    assert step["train/turns"] >= 1
    records = [json.loads(x) for x in (run.run_dir / "episodes.jsonl").read_text().splitlines()]
    train = [r for r in records if r["split"] == "train"]
    assert len(train) == 4 and all(r["error"] is None for r in train)
    for record in train:  # the game's rules opened every episode; its verdict is the reward
        assert "Tower of Hanoi with 3 disks" in record["turns"][0]["content"]
        assert 0.0 <= record["score"] <= 1.0 and record["reason"]  # the game's reason, or "not ended"


@pytest.mark.beyondagent_plugins("textarena", "torch", "mixers")
def test_a_two_player_game_reports_the_policys_win_draw_and_loss_rates(run_spec: Any) -> None:
    run = run_spec(EXAMPLE, *ONE_STEP, "tasks.train.game=nim", "tasks.val.game=nim", "tasks.val.count=4",
                   "workflow.max_turns=8", "run.name=nim")
    lines = [json.loads(x) for x in (run.run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
    for split, line in (("train", next(x for x in lines if "train/reward_mean" in x)),
                        ("val", next(x for x in lines if x.get("step") == 1 and "val/pass@1" in x))):
        rates = {name: value for name, value in line.items() if name.startswith(f"{split}/") and name.endswith("_rate")
                 and name != f"{split}/success_rate"}
        assert {f"{split}/win_rate", f"{split}/draw_rate", f"{split}/loss_rate"} <= set(rates), rates
        assert sum(rates.values()) == pytest.approx(1.0)
    assert line["val/win_rate"] == line["val/pass@1"]  # a win is a success
    records = [json.loads(x) for x in (run.run_dir / "episodes.jsonl").read_text().splitlines()]
    assert {r["details"]["seat"] for r in records if r["split"] == "train"} <= {0, 1}  # the viewer shows the seat



SELFPLAY = EXAMPLE.with_name("selfplay_tictactoe.yaml")


@pytest.mark.beyondagent_plugins("textarena", "torch", "mixers", "envservice", "advantages")
def test_the_selfplay_example_trains_both_seats_behind_an_env_service(run_spec: Any,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # the seats' turns, `seat` in each step's info and `seat_rewards()` cross the service's HTTP API
    monkeypatch.setenv("BEYONDAGENT_PLUGINS", "textarena")
    run = run_spec(SELFPLAY, *ONE_STEP, "tasks.val.count=2", "env.service=launch", "run.name=selfplay")
    records = [json.loads(x) for x in (run.run_dir / "episodes.jsonl").read_text().splitlines()]
    train = [r for r in records if r["split"] == "train"]
    assert len(train) == 2 * 2 * 2 and all(r["error"] is None for r in train)  # tasks x group x seats
    for game in range(4):
        zero, one = sorted((r for r in train if r["index"] // 2 == game), key=lambda r: r["seat"])
        assert (zero["seat"], one["seat"]) == (0, 1) and zero["details"]["opponent"] == "self"
        outcomes = {zero["details"]["outcome"], one["details"]["outcome"]}
        assert outcomes in ({"win", "loss"}, {"draw"}, {"unfinished"})  # the seats' rewards are one game's
    val = [r for r in records if r["split"] == "val"]
    assert val and all(r["seat"] is None and r["details"]["opponent"] == "random" for r in val)


@pytest.mark.beyondagent_plugins("textarena", "torch", "mixers", "advantages")
def test_against_the_opponent_pool_only_the_policys_seat_is_trained(run_spec: Any) -> None:
    # `tiny` cannot spell a move: the opener loses on its third malformed reply, before the other seat
    # moves; a game in which the snapshot never moved is still the pool's (its seat is not the policy's)
    run = run_spec(SELFPLAY, *ONE_STEP, "tasks.val=null", "run.name=pool",
                   "backend.opponent_pool={size: 1, refresh_every: 1, games: 1.0}")
    train = [json.loads(x) for x in (run.run_dir / "episodes.jsonl").read_text().splitlines()]
    assert [r["seat"] for r in train] == [0, 1, 0, 1]  # one record a game: the policy's seat, in turn
    assert all(r["metrics"]["opponent_step"] == 0 for r in train)
    lines = [json.loads(x) for x in (run.run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
    step = next(line for line in lines if line.get("step") == 1)
    won = sum(r["score"] > 0.5 for r in train)  # the policy's reward above the snapshot's
    assert step["pool/games"] == 4 and step["pool/win_rate"] == won / 4


@pytest.mark.beyondagent_plugins("textarena", "torch", "mixers", "advantages")
def test_eval_head_to_head_against_a_checkpoint(tmp_path: Path) -> None:
    # `tiny` against `tiny`, greedy: neither can spell a move, so the opener loses on its third malformed
    # reply; the model opens sample 0 (seat 0) and answers in sample 1 (seat 1): it wins exactly half
    import os
    import subprocess
    import sys

    env = {**os.environ, "BEYONDAGENT_PLUGINS": "textarena,mixers,torch,advantages"}
    env.pop("BEYONDAGENT_DISABLE_PLUGIN_AUTOLOAD", None)
    proc = subprocess.run([sys.executable, "-m", "beyondagent_core.cli", "eval", str(SELFPLAY),
                           f"run.output_dir={tmp_path / 'runs'}", "tasks.val.opponent=null", "tasks.val.count=2",
                           "--checkpoint", "tiny", "--opponent-checkpoint", "tiny", "--k", "2", "--temperature", "0",
                           "--out", str(tmp_path / "eval")], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((tmp_path / "eval" / "eval.json").read_text())
    assert result["opponent"].startswith("checkpoint ") and "against checkpoint" in proc.stdout
    assert result["by_seat"]["seat 0"]["loss_rate"] == 1.0 and result["by_seat"]["seat 1"]["win_rate"] == 1.0
    assert result["summary"]["win_rate"] == 0.5 and result["summary"]["elo_vs_opponent"] == 0.0
