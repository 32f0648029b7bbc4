"""Self-play on the torch backend: a two-seat episode (torch_test_envs' `word_duel`) is played by the
policy on both sides and trains both seats from the one rollout, each seat its own token sequence and
reward, measured against the same seat's games (`Episode.baseline_group`, `rae`'s per-role baselines);
`rae`'s baselines survive `--resume` (the checkpoint's `estimator.json`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from beyondagent_plugin_torch.metrics_log import read_metrics
from torch_test_envs import word_game_spec

pytestmark = pytest.mark.beyondagent_plugins("torch", "mixers", "advantages")


def duel_spec(tmp_path: Path, **backend) -> dict:
    spec = word_game_spec(tmp_path, batch_size=2, total_steps=2, save_every=1, keep_checkpoints=2,
                          advantage={"name": "rae", "decay": 0.5}, **backend)
    spec["env"] = {"name": "word_duel", "moves": 2}
    spec["workflow"]["max_turns"] = 2
    spec["algorithm"]["group_size"] = 4
    spec["logging"] = {"episodes": "all"}
    spec["tasks"]["val"] = None
    return spec


def records(run_dir: Path, split: str = "train") -> list[dict]:
    lines = (run_dir / "episodes.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["split"] == split]


def test_both_seats_train_from_one_rollout_against_their_own_seats_baseline_kept_on_resume(
        run_spec, test_envs, tmp_path: Path) -> None:
    run = run_spec(duel_spec(tmp_path))
    step1 = [r for r in records(run.run_dir) if r["step"] == 1]
    assert len(step1) == 2 * 4 * 2  # tasks x group x seats: one record per seat
    by_game: dict = {}
    for record in step1:
        by_game.setdefault((record["group"], record["index"] // 2), {})[record["seat"]] = record
    for (group, _), seats in by_game.items():
        assert set(seats) == {0, 1}
        zero, one = seats[0], seats[1]
        assert zero["turns"][1]["content"].startswith("You are seat 0")
        assert one["turns"][0]["content"].startswith("You are seat 1")  # its own view: the other's move
        assert zero["score"] + one["score"] == pytest.approx(1.0)  # the duel is zero-sum
        for record in (zero, one):
            trained = sum(record["tokens"]["mask"][1::2])
            assert trained > 0  # each seat's own model tokens are trained
    # rae: each seat's advantage is its score against its role's baseline (the step's mean, at step 1)
    metrics = {r["step"]: r for r in read_metrics(run.run_dir)}
    for seat in (0, 1):
        scores = [r["score"] for r in step1 if r["seat"] == seat]
        baseline = sum(scores) / len(scores)
        assert metrics[1][f"advantage/baseline/-/seat{seat}"] == pytest.approx(baseline, abs=1e-6)
        for record in (r for r in step1 if r["seat"] == seat):
            values = [value for value, _ in record["tokens"]["advantages"] if value != 0]
            assert values == [pytest.approx(record["score"] - baseline, abs=1e-3)] * len(values)
    # step 2 folds its mean into the running baseline with decay 0.5
    step2 = [r for r in records(run.run_dir) if r["step"] == 2]
    scores = [r["score"] for r in step2 if r["seat"] == 0]
    expected = 0.5 * metrics[1]["advantage/baseline/-/seat0"] + 0.5 * sum(scores) / len(scores)
    assert metrics[2]["advantage/baseline/-/seat0"] == pytest.approx(expected, abs=1e-6)

    # the baselines are kept in the checkpoint: a run stopped after step 1 and resumed has the same step 2
    spec, whole = duel_spec(tmp_path), metrics
    spec["run"]["output_dir"] = str(tmp_path / "resumed")
    spec["backend"]["total_steps"] = 1
    first = run_spec(spec)
    saved = json.loads((first.run_dir / "checkpoints" / "step_000001" / "estimator.json").read_text())
    assert saved["step"] == 1 and set(saved["baselines"]) == {"-/seat0", "-/seat1"}
    resumed = {r["step"]: r for r in read_metrics(run_spec(spec, "backend.total_steps=2", resume=True).run_dir)}
    for key in ("advantage/baseline/-/seat0", "advantage/baseline/-/seat1", "actor/pg_loss", "train/reward_mean"):
        assert resumed[2][key] == pytest.approx(whole[2][key], rel=1e-5, abs=1e-7), key
