"""The episode spool's and the group gate's edges (episode_spool.py, group_gate.py; main venv, no verl).

`test_episode_spool.py` and `test_v1_failed_episodes.py` run the spool through a stand-in trainer and
the gate with sessions reporting in order. Here, at the edges those leave open:

- the token block: a turn span starting exactly at the sequence's end is dropped, one running past
  it is cut there; the prompt's tokens are mask 0 (no log-prob kept);
- rows without verl's step spool under `step-unknown` and come back as step None;
- `take_step`: a line that is JSON but no object is skipped; lines whose `episode` record is None (not
  kept) are returned but not written; records are ordered training first, then by group and sample as numbers;
- the trainer's advantages reach a record only when they cover exactly its response; step values are
  rounded, None kept;
- a resume at step N keeps step N's training records, and its validation unless verl validates again;
  records without a step and a file with nothing to drop stay as they were;
- the gate settles a group only when its last session reported, and gives each session its own
  verdict whatever order they reported in.

`make_line` is test_episode_spool.py's spool line.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from beyondagent_plugin_verl import episode_spool
from beyondagent_plugin_verl.group_gate import GroupGate, Verdict
from test_episode_spool import make_line

from beyondagent_core.episode_records import EPISODES_FILE, expand_tokens


def pieces(ids: list[int]) -> list[str]:
    return [f"t{i}" for i in ids]


def test_a_turn_span_from_the_sequences_end_is_dropped_and_one_past_it_is_cut() -> None:
    block = episode_spool.token_block([1, 2], [7, 8, 9], [1, 0, 1], [-0.5, 0.0, -0.25], [(2, 3), (3, 9), (5, 6)],
                                      pieces)
    assert block["turn_spans"] == [[2, 3], [3, 5]]
    rows = expand_tokens({"tokens": block})
    assert [(r["mask"], r["logprob"]) for r in rows[:2]] == [(0, None), (0, None)]
    assert [r["logprob"] for r in rows if r["mask"]] == [-0.5, -0.25]
    assert block["prompt_length"] == 2


def test_rows_without_a_step_spool_as_the_unknown_step(tmp_path: Path) -> None:
    path = episode_spool.spool(tmp_path, None, make_line(1, "train", 0, 0, True))
    assert path.parent == tmp_path / episode_spool.SPOOL_DIR / "step-unknown"
    assert episode_spool.pending_steps(tmp_path) == [None]
    assert len(episode_spool.take_step(tmp_path, None)) == 1 and episode_spool.pending_steps(tmp_path) == []


def test_take_step_orders_training_first_then_group_and_sample_as_numbers(tmp_path: Path) -> None:
    lines = [make_line(2, "val", 0, 0, True), make_line(2, "train", 10, 1, True), make_line(2, "train", 2, 1, False),
             make_line(2, "train", 2, 0, True)]
    facts_only = {**make_line(2, "train", 3, 0, True), "episode": None}  # logging.episodes did not keep it
    for line in [*lines, facts_only]:
        episode_spool.spool(tmp_path, 2, line)
    path = episode_spool.spool(tmp_path, 2, lines[0])
    with path.open("a") as handle:
        handle.write("[1, 2]\n\n")  # JSON, but no episode's line
    taken = episode_spool.take_step(tmp_path, 2)
    assert len(taken) == 6  # every episode's facts, the one without a record included
    records = [json.loads(line) for line in (tmp_path / EPISODES_FILE).read_text().splitlines()]
    assert [(r["split"], r["group"], r["index"]) for r in records] == [
        ("train", 2, 4), ("train", 2, 5), ("train", 10, 21), ("val", 0, 0), ("val", 0, 0)]


def test_a_step_without_records_writes_no_file(tmp_path: Path) -> None:
    episode_spool.spool(tmp_path, 4, {**make_line(4, "train", 0, 0, True), "episode": None})
    assert len(episode_spool.take_step(tmp_path, 4)) == 1
    assert not (tmp_path / EPISODES_FILE).exists()


def test_advantages_reach_a_record_only_when_they_cover_its_whole_response() -> None:
    def record() -> dict:
        return make_line(3, "train", 0, 0, True)["episode"]  # a prompt of 3 tokens, a response of 2

    short = episode_spool.with_advantages(record(), {"advantages": [0.5], "step_values": None})
    assert short["tokens"]["advantages"] is None
    exact = episode_spool.with_advantages(record(), {"advantages": [0.5, -0.125]})
    assert [r["advantage"] for r in expand_tokens(exact)] == [0.0, 0.0, 0.0, 0.5, -0.125]
    valued = episode_spool.with_advantages(record(), {"step_values": [0.123456, None, 2]})
    assert valued["step_values"] == [0.1235, None, 2.0] and valued["tokens"]["advantages"] is None
    assert episode_spool.with_advantages(record(), None) == record()


def write_records(path: Path, records: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


@pytest.mark.parametrize(("revalidates", "kept"), [
    (False, [(1, "train"), (1, "val"), (2, "train"), (2, "val"), (None, "train")]),
    (True, [(1, "train"), (1, "val"), (2, "train"), (None, "train")]),
])
def test_a_resume_keeps_its_steps_training_and_its_validation_unless_validated_again(
        tmp_path: Path, revalidates: bool, kept: list) -> None:
    records = [{"step": step, "split": split} for step in (1, 2, 3) for split in ("train", "val")]
    records.append({"step": None, "split": "train"})  # no step: never dropped
    write_records(tmp_path / EPISODES_FILE, records)
    dropped = episode_spool.trim_records(tmp_path, resumed_step=2, revalidates=revalidates)
    got = [(r["step"], r["split"]) for r in map(json.loads, (tmp_path / EPISODES_FILE).read_text().splitlines())]
    assert got == kept and dropped == len(records) - len(kept)


def test_a_records_file_with_nothing_to_drop_is_left_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / EPISODES_FILE
    text = json.dumps({"step": 1, "split": "train"}) + "\n" + '{"step": 2, "spl\n'  # a torn line stays
    path.write_text(text)
    assert episode_spool.trim_records(tmp_path, resumed_step=1, revalidates=True) == 0
    assert path.read_text() == text
    assert episode_spool.trim_records(tmp_path / "elsewhere", resumed_step=1, revalidates=True) == 0


def test_the_gate_waits_for_the_last_session_and_answers_each_its_own_whatever_the_order() -> None:
    gate = GroupGate()

    async def run() -> list[tuple[Verdict, bool]]:
        gate.report("u", 3, 2, "timeout")  # the last session reports first, failed
        gate.report("u", 3, 0, None)
        first = [asyncio.create_task(gate.verdict("u", s)) for s in (2, 0)]
        await asyncio.sleep(0)  # a yield to the event loop: the tasks reach their wait
        assert not any(task.done() for task in first)  # session 1 has not reported
        gate.report("u", 3, 1, None)
        return [*await asyncio.gather(*first), await gate.verdict("u", 1)]

    assert asyncio.run(run()) == [(Verdict.DROP, False), (Verdict.TRAIN, False), (Verdict.TRAIN, False)]
    assert gate.pending() == 0


def test_a_group_left_one_finished_episode_is_skipped_for_every_session() -> None:
    gate = GroupGate()

    async def run() -> list[tuple[Verdict, bool]]:
        gate.report("u", 3, 1, None)
        gate.report("u", 3, 0, "error", waits=False)  # a raising episode asks no verdict
        gate.report("u", 3, 2, "timeout")
        return [await gate.verdict("u", 1), await gate.verdict("u", 2)]

    assert asyncio.run(run()) == [(Verdict.SKIP, True), (Verdict.DROP, True)]
    assert gate.pending() == 0
