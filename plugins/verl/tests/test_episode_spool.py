"""The verl backend's episode records: workers spool, the launcher is the one writer of episodes.jsonl.

No verl here: the workers' side (`keeps`, `token_block`, `spool`) is plain Python, and the
launcher's `_launch` runs a stand-in trainer (this file's `FAKE_TRAINER`) that spools from two
worker processes at once and writes verl's file-logger lines, as verl's trainer and its Ray
workers do. The real agent loop in verl's real worker writes the same spool in
`test_agent_loop.py`.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from beyondagent_plugin_verl import episode_spool
from beyondagent_plugin_verl.backend import VerlBackend, trim_metrics, verl_resume_step
from beyondagent_plugin_verl.config import VerlConfig

from beyondagent_core.episode_records import EPISODES_FILE, EpisodeSampling, episode_record, expand_tokens
from beyondagent_core.types import Reward, Task, Trajectory, Turn

PLUGIN_ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("setting", ["all", "none", "failures", "0.1", "0.5", "1", "0"])
@pytest.mark.parametrize("split", ["train", "val"])
def test_each_worker_keeps_what_picked_keeps_over_the_whole_step(setting: str, split: str) -> None:
    sampling = EpisodeSampling(setting, seed=7)
    groups, samples = 6, 4
    for step in range(12):
        failed = [(step * 7 + i * 3) % 5 == 0 for i in range(groups * samples)]
        names = [i // samples for i in range(groups * samples)]
        whole_step = set(sampling.picked(step, split, names, failed))
        alone = {i for i in range(groups * samples)
                 if episode_spool.keeps(sampling, step=step, split=split, group=names[i], groups=groups,
                                        failed=failed[i])}
        assert alone == whole_step, (setting, split, step)


def test_a_group_outside_the_known_ones_is_still_decided() -> None:
    assert episode_spool.keeps(EpisodeSampling("all"), step=1, split="train", group=9, groups=4, failed=False)
    assert episode_spool.keeps(EpisodeSampling("failures"), step=1, split="val", group=3, groups=None, failed=True)
    assert not episode_spool.keeps(EpisodeSampling("none"), step=1, split="val", group=3, groups=None, failed=True)


def test_the_token_block_is_what_verl_trains_on_without_advantages() -> None:
    block = episode_spool.token_block([1, 2, 3], [10, 11, 4, 12], [1, 1, 0, 1], [-0.5, -0.25, 0.0, -1.0],
                                      [(3, 5), (6, 7), (9, 12)], lambda ids: [f"t{i}" for i in ids])
    rows = expand_tokens({"tokens": block})
    assert [r["id"] for r in rows] == [1, 2, 3, 10, 11, 4, 12]
    assert [r["mask"] for r in rows] == [0, 0, 0, 1, 1, 0, 1]
    assert [r["logprob"] for r in rows if r["mask"]] == [-0.5, -0.25, -1.0]
    assert block["advantages"] is None and all(r["advantage"] is None for r in rows)
    assert block["prompt_length"] == 3 and block["turn_spans"] == [[3, 5], [6, 7]]  # spans past the end dropped


def make_line(step: int, split: str, group: int, sample: int, success: bool) -> dict[str, Any]:
    """One spool line as the agent loop writes it (facts + the episode's record)."""
    task = Task(task_id=f"{split}-{group}", env="frozenlake", query="reach the goal")
    trajectory = Trajectory(task=task, turns=[Turn(role="user", content="start"), Turn(role="assistant", content="R")],
                            reward=Reward(score=float(success), success=success, reason="goal" if success else "hole"))
    tokens = episode_spool.token_block([1, 2, 3], [10 + group, 11], [1, 1], [-0.5, -0.25], [(3, 5)],
                                       lambda ids: [f"t{i}" for i in ids])
    record = episode_record(step=step, split=split, index=group * 2 + sample, group=group, trajectory=trajectory,
                            tokens=tokens)
    return {"task_id": task.task_id, "origin": "original", "success": success, "reward": float(success),
            "model_turns": 1, "error": None, "global_steps": step, "split": split, "group": group, "epoch": 0,
            "episode": record}


FAKE_TRAINER = '''
import json, os, subprocess, sys, time
from pathlib import Path
run_dir, lines_file = Path(sys.argv[1]), Path(sys.argv[2])
by_step = json.loads(lines_file.read_text())
metrics = Path(os.environ["VERL_FILE_LOGGER_PATH"])
WORKER = """
import json, sys
from pathlib import Path
from beyondagent_plugin_verl.episode_spool import spool
for line in json.loads(sys.argv[2]):
    spool(Path(sys.argv[1]), line["global_steps"], line)
"""
for step, lines in by_step:
    halves = [lines[0::2], lines[1::2]]  # two workers, spooling at the same time
    workers = [subprocess.Popen([sys.executable, "-c", WORKER, str(run_dir), json.dumps(h)]) for h in halves]
    assert all(w.wait() == 0 for w in workers)
    with metrics.open("a") as handle:
        handle.write(json.dumps({"step": step, "data": {"critic/score/mean": 0.5}}) + "\\n")
    time.sleep(0.3)
'''


class FakeVenv:
    """What `_launch` needs of verl's venv: a `python` that runs the stand-in trainer instead."""

    def __init__(self, tmp: Path, run_dir: Path, lines_file: Path):
        script = tmp / "trainer.py"
        script.write_text(FAKE_TRAINER)
        self.python = tmp / "python"
        self.python.write_text(f"#!/bin/sh\nexec {sys.executable} {script} {run_dir} {lines_file}\n")
        self.python.chmod(0o755)

    def environ(self, extra: dict[str, str]) -> dict[str, str]:
        path = os.pathsep.join([str(PLUGIN_ROOT), os.environ.get("PYTHONPATH", "")])
        return {**os.environ, "PYTHONPATH": path, **extra}


def test_the_launcher_merges_each_steps_spool_into_episodes_jsonl(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    (run_dir / "verl").mkdir(parents=True)
    config_path = run_dir / "verl" / "verl_config.yaml"
    config_path.write_text("{}\n")
    by_step = []
    for step in (0, 1, 2):
        lines = [] if step == 0 else [make_line(step, "train", g, s, success=(g + s + step) % 3 == 0)
                                      for g in range(3) for s in range(2)]
        if step != 1:
            lines += [make_line(step, "val", g, 0, success=g == 1) for g in range(2)]
        by_step.append((step, lines))
    lines_file = tmp_path / "lines.json"
    lines_file.write_text(json.dumps(by_step))
    reported = []
    run = SimpleNamespace(run_dir=run_dir, resume=False, step_finished=lambda step, m: reported.append((step, m)),
                          spec=SimpleNamespace(secrets=set(), resolved={}))
    VerlBackend(VerlConfig())._launch(run, config_path, FakeVenv(tmp_path, run_dir, lines_file), steps=2)

    records = [json.loads(line) for line in (run_dir / EPISODES_FILE).read_text().splitlines()]
    assert len(records) == sum(len(lines) for _, lines in by_step)
    assert [(r["step"], r["split"], r["group"], r["index"]) for r in records] == [
        (r["step"], r["split"], r["group"], r["index"]) for _, lines in by_step
        for r in sorted((li["episode"] for li in lines), key=lambda r: (r["split"] != "train", r["group"], r["index"]))]
    assert not (run_dir / episode_spool.SPOOL_DIR).exists() or not any((run_dir / episode_spool.SPOOL_DIR).iterdir())
    # the success rate of a step comes from its training episodes' facts only
    steps = {step: metrics for step, metrics in reported}
    train_1 = [li for li in by_step[1][1] if li["split"] == "train"]
    assert steps[1]["train/success_rate"] == pytest.approx(sum(li["success"] for li in train_1) / len(train_1))
    assert "train/success_rate" not in steps[0]
    check_viewer(run_dir, records)


def check_viewer(run_dir: Path, records: list[dict[str, Any]]) -> None:
    """The viewer (beyondagent-plugin-view) reads a verl run's records: its index, tokens with their
    mask and no advantage, a group."""
    import re

    import httpx

    pytest.importorskip("beyondagent_plugin_view", reason="the viewer's part needs beyondagent-plugin-view")
    from beyondagent_plugin_view.app import create_app, open_runs
    from beyondagent_plugin_view.command import ServerThread
    from beyondagent_plugin_view.index import EpisodeIndex

    index = EpisodeIndex(run_dir)
    assert index.refresh(force=True) == len(records)
    assert index.query("SELECT COUNT(*) FROM episodes WHERE split = 'val'")[0][0] == 4
    assert index.query("SELECT SUM(trained) FROM episodes")[0][0] == 2 * len(records)
    row, record = index.read(1)
    assert row["step"] == 0 and expand_tokens(record)[3]["advantage"] is None
    index.close()

    first_train = 1 + next(i for i, r in enumerate(records) if r["split"] == "train")
    with ServerThread(create_app(open_runs([run_dir], min_interval_s=0))) as url, \
            httpx.Client(base_url=url, timeout=20) as http:
        data = http.get(f"/r/0/api/episodes/{first_train}").json()
        assert [t["mask"] for t in data["tokens"]] == [0, 0, 0, 1, 1]
        assert [t["logprob"] for t in data["tokens"] if t["mask"]] == [-0.5, -0.25]
        assert all(t["advantage"] is None for t in data["tokens"])
        html = http.get(f"/r/0/episode/{first_train}").text
        spans = re.findall(r'<span class="tok (m[01])"[^>]*title="([^"]*)"', html)
        assert [mask for mask, _ in spans] == ["m0", "m0", "m0", "m1", "m1"]
        assert "advantage" not in spans[3][1] and "log-prob -0.500" in spans[3][1]
        group = http.get("/r/0/api/group", params={"step": 1, "split": "train", "group": "0"}).json()
        assert http.get("/r/0/group", params={"step": 1, "split": "train", "group": "0"}).status_code == 200
    assert len(group["episodes"]) == 2


def test_a_torn_spool_line_costs_that_line_only(tmp_path: Path) -> None:
    path = episode_spool.spool(tmp_path, 3, make_line(3, "train", 0, 0, True))
    with path.open("a") as handle:
        handle.write('{"split": "train", "episo')  # a worker killed mid-line
    assert len(episode_spool.read_step(tmp_path, 3)) == 1
    assert episode_spool.pending_steps(tmp_path) == [3]
    assert len(episode_spool.take_step(tmp_path, 3)) == 1 and episode_spool.pending_steps(tmp_path) == []


def test_a_launch_fits_episodes_jsonl_to_where_verl_starts(tmp_path: Path) -> None:
    path = tmp_path / EPISODES_FILE
    lines = [make_line(step, split, 0, 0, True)["episode"] for step in (0, 1, 2, 3) for split in ("train", "val")
             if not (step == 0 and split == "train")]
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    episode_spool.spool(tmp_path, 4, make_line(4, "train", 0, 0, True))  # a stopped launch's spool
    # verl resumes from its checkpoint at step 2 and validates again first: val of 2, and 3, run again
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "latest_checkpointed_iteration.txt").write_text("2\n")
    assert verl_resume_step(tmp_path) == 2
    said = episode_spool.prepare(tmp_path, resume_step=2, revalidates=True)
    assert said == "3 records after step 2 dropped"
    kept = [(r["step"], r["split"]) for r in map(json.loads, path.read_text().splitlines())]
    assert kept == [(0, "val"), (1, "train"), (1, "val"), (2, "train")]
    assert not (tmp_path / episode_spool.SPOOL_DIR).exists()
    assert episode_spool.prepare(tmp_path, resume_step=2, revalidates=False) == "0 records after step 2 dropped"
    # no checkpoint: verl starts afresh, the earlier records move aside
    said = episode_spool.prepare(tmp_path, resume_step=None, revalidates=True)
    assert said.startswith("an earlier run's records moved to ") and not path.exists()
    assert len(list((tmp_path / "previous").glob(f"*/{EPISODES_FILE}"))) == 1
    assert episode_spool.prepare(tmp_path, resume_step=None, revalidates=True) == "no earlier records"


def test_the_trainers_advantages_and_step_values_reach_their_records(tmp_path: Path) -> None:
    lines = [{**make_line(3, "train", group, 0, success=group == 0), "episode_id": f"ep{group}"} for group in range(2)]
    lines.append({**make_line(3, "val", 0, 0, success=True), "episode_id": "val0"})  # validation: no advantages
    for line in lines:
        episode_spool.spool(tmp_path, 3, line)
    episode_spool.spool_advantages(tmp_path, 3, [
        {"id": "ep0", "advantages": [0.5, 0.25], "step_values": [0.75]},
        {"id": "ep1", "advantages": [-0.5, -0.5], "step_values": None}])
    taken = episode_spool.take_step(tmp_path, 3)
    assert len(taken) == 3  # the advantages file is not an episode's line
    records = [json.loads(line) for line in (tmp_path / EPISODES_FILE).read_text().splitlines()]
    by_group = {(r["split"], r["group"]): r for r in records}
    rows = expand_tokens(by_group[("train", 0)])
    assert [r["advantage"] for r in rows] == [0.0, 0.0, 0.0, 0.5, 0.25]  # the prompt gets 0
    assert by_group[("train", 0)]["step_values"] == [0.75]
    assert [r["advantage"] for r in expand_tokens(by_group[("train", 1)])][3:] == [-0.5, -0.5]
    assert by_group[("train", 1)]["step_values"] is None
    assert by_group[("val", 0)]["tokens"]["advantages"] is None
    assert not episode_spool.step_dir(tmp_path, 3).exists()


def test_a_resumed_run_drops_the_metrics_lines_of_the_steps_verl_runs_again(tmp_path: Path) -> None:
    # a run stopped after logging step 3 but checkpointing step 2: verl runs step 3 again
    lines = [{"step": step, "train/reward_mean": step / 10} for step in (1, 2, 3)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert trim_metrics(tmp_path, 2) == 1
    kept = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [line["step"] for line in kept] == [1, 2] and kept[1]["train/reward_mean"] == 0.2
    assert trim_metrics(tmp_path, 2) == 0  # nothing past the checkpoint: the file stays as it is
