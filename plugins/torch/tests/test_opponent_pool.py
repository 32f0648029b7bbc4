"""The opponent pool (`backend.opponent_pool`, opponent_pool.py): frozen snapshots of the policy play the
other seats of a two-seat game (torch_test_envs' `word_duel`), those seats are not trained, the policy's
seat alternates within a group, Elo ratings follow the games by hand, snapshots are the policy's weights
at their step, and the pool survives `--resume`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from beyondagent_plugin_torch.config import OpponentPoolSettings
from beyondagent_plugin_torch.metrics_log import read_metrics
from beyondagent_plugin_torch.opponent_pool import (
    Opponent,
    OpponentPool,
    PoolEntry,
    elo_expected,
    elo_update,
    game_score,
)
from safetensors.torch import load_file
from test_selfplay import duel_spec, records

from beyondagent_core.errors import SpecError
from beyondagent_core.types import Task

pytestmark = pytest.mark.beyondagent_plugins("torch", "mixers", "advantages")


def pool_spec(tmp_path: Path, name: str, **pool) -> dict:
    spec = duel_spec(tmp_path)
    spec["run"]["output_dir"] = str(tmp_path / name)
    spec["backend"]["opponent_pool"] = {"size": 2, "refresh_every": 1, "games": 1.0, **pool}
    return spec


# --- by hand ----------------------------------------------------------------------------------


def test_elo_by_hand_in_both_directions() -> None:
    assert elo_expected(1000, 1000) == 0.5
    assert elo_update(1000, 1000, 1.0) == (1016.0, 984.0)  # K = 32: an even game won moves 16 each way
    assert elo_update(1000, 1000, 0.0) == (984.0, 1016.0)
    expected = 1 / (1 + 10 ** (-200 / 400))  # 1200 against 1000: expected to score 0.7597
    mine, theirs = elo_update(1200, 1000, 0.5)
    assert mine == pytest.approx(1200 + 32 * (0.5 - expected)) and mine + theirs == pytest.approx(2200)
    assert [game_score(1, 0), game_score(0.5, 0.5), game_score(0, 1)] == [1.0, 0.5, 0.0]


def test_the_policy_alternates_seats_and_groups_are_drawn_from_the_seed() -> None:
    entry = PoolEntry(step=0, model=None, scheduler=None, rating=1000.0)
    assert [Opponent(entry, game).plays(1, 2) for game in range(4)] == [True, False, True, False]
    assert [Opponent(entry, 2).plays(seat, 3) for seat in range(3)] == [True, True, False]
    assert not Opponent(entry, 1).plays(0, 1) and not Opponent(entry, 1).plays(0, None)  # one seat, or unsaid

    def pool(games: float) -> OpponentPool:
        made = OpponentPool(OpponentPoolSettings(size=2, games=games), rollout_model=None, trained=set(),
                            make_scheduler=lambda model: None, seed=7)
        made.entries = [entry, PoolEntry(step=5, model=None, scheduler=None, rating=1000.0)]
        return made

    jobs = [(group, Task(f"t{group}")) for group in range(40) for _ in range(4)]
    assert pool(0.0).opponents(1, jobs) == [None] * len(jobs)
    everyone = pool(1.0).opponents(1, jobs)
    assert [o.game for o in everyone[:8]] == [0, 1, 2, 3, 0, 1, 2, 3]  # a game's place in its group
    assert all(len({id(o.entry) for o in everyone[g * 4:g * 4 + 4]}) == 1 for g in range(40))  # one entry a group
    assert {o.entry.step for o in everyone} == {0, 5}

    def drawn(games: float, step: int) -> list:
        return [None if o is None else (o.entry.step, o.game) for o in pool(games).opponents(step, jobs)]

    half = drawn(0.5, 1)
    played = sum(o is not None for o in half[::4])
    assert 10 <= played <= 30 and half == drawn(0.5, 1)  # about half the groups, the same draw on resume
    assert half != drawn(0.5, 2)


# --- a run ------------------------------------------------------------------------------------


def test_pool_seats_are_not_trained_and_step_one_replays_self_play(run_spec, test_envs, tmp_path: Path) -> None:
    """At step 1 the only snapshot is the starting policy, so a pool game is the self-play game with
    the same seeds: the policy's seat of it is token for token the self-play run's."""
    spec = duel_spec(tmp_path)
    spec["run"]["output_dir"] = str(tmp_path / "self")
    spec["backend"]["total_steps"] = 1
    self_run = run_spec(spec)
    self_play = {(r["index"] // 2, r["seat"]): r for r in records(self_run.run_dir)}  # (game, seat)
    pool_run = run_spec(pool_spec(tmp_path, "pool"), "backend.total_steps=1")
    mine = records(pool_run.run_dir)
    assert len(mine) == 2 * 4  # tasks x group: the snapshot's seats are neither trained nor recorded
    for index, record in enumerate(mine):
        assert record["index"] == index  # one episode a game: the policy's seat
        assert record["seat"] == index % 4 % 2  # the policy plays each side in turn within its group
        assert record["metrics"]["opponent_step"] == 0
        twin = self_play[(index, record["seat"])]
        assert record["tokens"]["ids"] == twin["tokens"]["ids"]
        assert record["score"] == twin["score"]
    # Elo by hand over the games in order (the duel is zero-sum: the snapshot scored 1 - mine)
    rating, theirs = 1000.0, 1000.0
    for record in mine:
        rating, theirs = elo_update(rating, theirs, game_score(record["score"], 1 - record["score"]))
    metrics = read_metrics(pool_run.run_dir)[-1]
    assert metrics["pool/elo"] == pytest.approx(rating) and metrics["pool/games"] == 8
    # the snapshot's turns went to its own scheduler: the policy's saw only its own seat's prompts
    fed = "rollout/kv_prefill_tokens", "rollout/kv_reused_tokens"
    assert sum(map(metrics.get, fed)) < 0.75 * sum(map(read_metrics(self_run.run_dir)[-1].get, fed))
    wins = sum(r["score"] == 1.0 for r in mine) / len(mine)
    assert metrics["pool/win_rate"] == pytest.approx(wins)
    assert metrics["pool/size"] == 1  # counted before the step's snapshot


def test_snapshots_are_the_policy_at_their_step_and_the_pool_resumes(run_spec, test_envs, tmp_path: Path) -> None:
    whole = run_spec(pool_spec(tmp_path, "whole"), "backend.total_steps=3", "backend.keep_checkpoints=3")
    checkpoints = whole.run_dir / "checkpoints"
    state = json.loads((checkpoints / "step_000002" / "opponent_pool" / "pool.json").read_text())
    assert [entry["step"] for entry in state["entries"]] == [1, 2]  # size 2: the starting policy made room
    snapshot = torch.load(checkpoints / "step_000002" / "opponent_pool" / "step_2.pt", weights_only=True)
    earlier = torch.load(checkpoints / "step_000002" / "opponent_pool" / "step_1.pt", weights_only=True)
    saved = load_file(checkpoints / "step_000002" / "model" / "model.safetensors")
    name = next(n for n in saved if n in snapshot and saved[n].dtype.is_floating_point)
    assert torch.equal(snapshot[name], saved[name])  # the policy's weights after step 2
    assert not torch.equal(snapshot[name], earlier[name])  # and not after step 1: the snapshots are frozen
    metrics = {r["step"]: r for r in read_metrics(whole.run_dir)}
    assert [metrics[s]["pool/size"] for s in (1, 2, 3)] == [1, 2, 2]
    if (whole.run_dir / "report.html").exists():  # drawn when matplotlib is installed
        assert "Opponent pool" in (whole.run_dir / "report.html").read_text()

    first = run_spec(pool_spec(tmp_path, "resumed"), "backend.total_steps=2")
    resumed = {r["step"]: r for r in read_metrics(run_spec(pool_spec(tmp_path, "resumed"), "backend.total_steps=3",
                                                           resume=True).run_dir)}
    assert first.run_dir == whole.run_dir.parent.parent / "resumed" / whole.run_dir.name
    for key in ("pool/elo", "pool/elo_best_snapshot", "pool/win_rate", "actor/pg_loss", "train/reward_mean"):
        assert resumed[3][key] == pytest.approx(metrics[3][key], rel=1e-5, abs=1e-7), key


def test_pool_refusals_and_dry_run(run_spec, test_envs, tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="opponent_pool.size must be <= 8"):
        run_spec(pool_spec(tmp_path, "big", size=9), dry_run=True)
    with pytest.raises(SpecError, match="rollout_mode one_step_off") as error:
        run_spec(pool_spec(tmp_path, "async"), "backend.rollout_mode=one_step_off")
    assert "backend.opponent_pool" in str(error.value)
    plan = run_spec(pool_spec(tmp_path, "plan", size=3, refresh_every=4, games=0.25), dry_run=True).plan.backend
    assert "the 3 newest snapshots" in plan and "one every 4 steps" in plan and "25% of the task groups" in plan


def test_with_lora_a_snapshot_keeps_the_adapters_and_resumes(run_spec, test_envs, tmp_path: Path) -> None:
    """A LoRA policy's snapshot is its adapters (the frozen base is the same in every entry): only those
    are saved, and a resumed run plays the same games against them."""
    lora = ("model.lora.rank=4", "model.lora.alpha=8", "backend.lr=0.05")
    whole = run_spec(pool_spec(tmp_path, "whole"), "backend.total_steps=2", *lora)
    snapshot = torch.load(whole.run_dir / "checkpoints" / "step_000002" / "opponent_pool" / "step_1.pt",
                          weights_only=True)
    assert snapshot and all("lora_" in name for name in snapshot)
    assert any(t.abs().sum() > 0 for name, t in snapshot.items() if "lora_B" in name)  # after step 1: B trained
    run_spec(pool_spec(tmp_path, "resumed"), "backend.total_steps=1", *lora)
    resumed = read_metrics(run_spec(pool_spec(tmp_path, "resumed"), "backend.total_steps=2", *lora,
                                    resume=True).run_dir)[-1]
    expected = read_metrics(whole.run_dir)[-1]
    for key in ("pool/elo", "actor/pg_loss", "train/reward_mean"):
        assert resumed[key] == pytest.approx(expected[key], rel=1e-5, abs=1e-7), key


def test_the_first_snapshot_is_the_policy_rl_starts_from_after_an_sft_warm_up(run_spec, test_envs,
                                                                              tmp_path: Path) -> None:
    """With `algorithm.sft` the pool's step-0 snapshot is the warmed-up policy (what RL starts from), not
    the spec's model: a checkpoint at step 1 keeps it, and it differs from the untrained weights."""
    from beyondagent_plugin_torch.models import load_policy

    data = tmp_path / "sft.jsonl"
    data.write_text("".join(json.dumps({"messages": [{"role": "user", "content": f"You are seat 0. Which way? ({i})"},
                                                     {"role": "assistant", "content": "left"}]}) + "\n"
                            for i in range(8)))
    spec = pool_spec(tmp_path, "warm", refresh_every=5)
    spec["algorithm"]["sft"] = {"data": str(data), "epochs": 3, "batch_size": 4, "lr": 0.01}
    run = run_spec(spec, "backend.total_steps=1")
    snapshot = torch.load(run.run_dir / "checkpoints" / "step_000001" / "opponent_pool" / "step_0.pt",
                          weights_only=True)
    untrained, _ = load_policy("tiny", dtype=torch.float32)
    start = dict(untrained.named_parameters())
    assert any(not torch.equal(tensor, start[name]) for name, tensor in snapshot.items())
