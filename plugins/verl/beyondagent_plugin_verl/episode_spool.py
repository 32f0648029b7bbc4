"""Episode records from verl's Ray workers to `<run_dir>/episodes.jsonl`, through one writer.

Several `AgentLoopWorker`s (Ray actors, maybe on other nodes) finish episodes at once, so none
of them appends to `episodes.jsonl`. Each worker appends one line per episode to its own spool
file for the step, `<run_dir>/verl/episodes/step-<N>/<host>-<pid>.jsonl` (opened, appended,
closed per episode): the facts the launcher's success rates need (`task_id`, `origin`,
`success`, ...) and, when the spec's `logging.episodes` keeps the episode, its `episodes.jsonl`
record (`episode`, the core's `episode_record` with the core's `token_view`). verl logs step N's
metrics only after all of step N's rollouts (and its validation) came back, so when the launcher
reads that line the step's spool is complete: `take_step` reads it, appends the kept records to
`episodes.jsonl` (the launcher is its only writer) and deletes the step's spool.

The sampling is the torch backend's (`EpisodeSampling`): a group is a task of the step (its row
within the step's batch: verl's step k reads rows `(k-1)*batch_size ...` of our train file, in
order; a validation task's row in the val file), and the worker knows the number of groups of
the step, so it decides alone, exactly as `EpisodeSampling.picked` over the whole step would.
Advantages are computed later, inside verl's trainer: with verl's GRPO the records have none
(`advantages: null`); with an estimator of ours (`sync_trainer.py`) the trainer spools each
episode's advantages and step values to `step-<N>/advantages/`, keyed by the episode's id, and
`take_step` puts them into the records.

No verl import here (the launcher and the tests use it outside verl's venv).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from beyondagent_core.episode_records import EPISODES_FILE, EpisodeSampling, token_view, value_runs
from beyondagent_core.jsonl import append_jsonl, write_jsonl
from beyondagent_core.run_records import json_safe

SPOOL_DIR = Path("verl") / "episodes"
ADVANTAGES_DIR = "advantages"  # inside a step's spool: the trainer's advantages, by episode id
UNKNOWN_STEP = "unknown"  # rows that came without verl's `global_steps` (not verl's V1 trainer)


def step_dir(run_dir: Path, step: int | None) -> Path:
    name = f"step-{step}" if isinstance(step, int) else f"step-{UNKNOWN_STEP}"
    return Path(run_dir) / SPOOL_DIR / name


# -- in the workers ------------------------------------------------------------------------------

def keeps(sampling: EpisodeSampling, *, step: int | None, split: str, group: int, groups: int | None,
          failed: bool) -> bool:
    """Whether `logging.episodes` keeps this episode: the answer `EpisodeSampling.picked` gives over
    the whole step (`groups` tasks, numbered 0..groups-1), from this episode alone."""
    known = range(groups) if groups else range(0)
    names = list(known) if group in known else [*known, group]
    picked = sampling.picked(step if step is not None else 0, split, names, [failed] * len(names))
    return names.index(group) in picked


def token_block(prompt_ids: Sequence[int], response_ids: Sequence[int], response_mask: Sequence[int],
                response_logprobs: Sequence[float], turn_spans: Sequence[tuple[int, int]],
                pieces: Callable[[Sequence[int]], list[str]]) -> dict[str, Any]:
    """The core's token block for what verl trains on: the prompt (mask 0), then the response with
    verl's mask and rollout log-probs; no advantages (verl computes them after the rollout)."""
    ids = [*prompt_ids, *response_ids]
    mask = [0] * len(prompt_ids) + [int(m) for m in response_mask]
    logprobs = [0.0] * len(prompt_ids) + [float(x) for x in response_logprobs]
    spans = [(start, min(end, len(ids))) for start, end in turn_spans if start < len(ids)]
    return token_view(ids, mask, logprobs, None, pieces(ids), spans, len(prompt_ids))


def spool(run_dir: Path, step: int | None, line: dict[str, Any]) -> Path:
    """Append one episode's line to this worker's spool file of `step`; returns the file."""
    return _append(step_dir(run_dir, step), [line])


def _append(directory: Path, lines: Sequence[dict[str, Any]]) -> Path:
    """Append `lines` to this process's file in `directory` (one file per process: no two writers)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{socket.gethostname()}-{os.getpid()}.jsonl"
    with path.open("a", encoding="utf-8") as handle:
        for line in lines:
            handle.write(json.dumps(json_safe(line), default=str, ensure_ascii=False) + "\n")
    return path


# -- in the launcher -----------------------------------------------------------------------------

def spool_advantages(run_dir: Path, step: int, values: Sequence[dict[str, Any]]) -> Path:
    """In verl's trainer: each episode's `{"id", "advantages" (its response tokens), "step_values"}`."""
    return _append(step_dir(run_dir, step) / ADVANTAGES_DIR, values)


def read_step(run_dir: Path, step: int | None, directory: Path | None = None) -> list[dict[str, Any]]:
    """Every complete spool line of `step` (a line torn by a killed worker is left out)."""
    lines = []
    directory = directory or step_dir(run_dir, step)
    for path in sorted(directory.glob("*.jsonl")) if directory.is_dir() else []:
        for raw in path.read_bytes().split(b"\n")[:-1]:  # after the last newline: torn or empty
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if isinstance(line, dict):
                lines.append(line)
    return lines


def take_step(run_dir: Path, step: int | None) -> list[dict[str, Any]]:
    """A finished step: its kept records appended to `episodes.jsonl` (training first, then
    validation, each by group and sample), its spool deleted; returns the step's spool lines."""
    lines = read_step(run_dir, step)
    values = {v.get("id"): v for v in read_step(run_dir, step, step_dir(run_dir, step) / ADVANTAGES_DIR)}
    records = [with_advantages(line["episode"], values.get(line.get("episode_id")))
               for line in lines if isinstance(line.get("episode"), dict)]
    records.sort(key=lambda r: (r.get("split") != "train", _int(r.get("group")), _int(r.get("index"))))
    if records:
        append_jsonl(Path(run_dir) / EPISODES_FILE, records)
    shutil.rmtree(step_dir(run_dir, step), ignore_errors=True)
    return lines


def with_advantages(record: dict[str, Any], values: dict[str, Any] | None) -> dict[str, Any]:
    """`record` with the trainer's advantages of its response tokens and its step values, if any."""
    tokens = record.get("tokens")
    if not values:
        return record
    if isinstance(tokens, dict) and values.get("advantages") is not None:
        prompt = int(tokens.get("prompt_length") or 0)
        full = [0.0] * prompt + [float(a) for a in values["advantages"]]
        if len(full) == len(tokens.get("ids") or ()):
            tokens["advantages"] = value_runs(full)
    if values.get("step_values") is not None:
        record["step_values"] = [None if v is None else round(float(v), 4) for v in values["step_values"]]
    return record


def pending_steps(run_dir: Path) -> list[int | None]:
    """The steps with a spool not taken yet (`None` for rows without a step)."""
    root = Path(run_dir) / SPOOL_DIR
    steps: list[int | None] = []
    for directory in sorted(root.glob("step-*")) if root.is_dir() else []:
        name = directory.name.removeprefix("step-")
        steps.append(int(name) if name.isdigit() else None)
    return steps


def prepare(run_dir: Path, *, resume_step: int | None, revalidates: bool) -> str:
    """Before a launch: drop what a stopped launch left in the spool (verl rolls those steps out
    again), then fit `episodes.jsonl` to where verl starts. verl continues from its latest
    checkpoint (`resume_step`, `trainer.resume_mode: auto`): the records of the steps it runs again
    are dropped (those after it, and its validation when verl validates again before training).
    Without a checkpoint verl starts afresh: an earlier run's file moves to `previous/<time>/`.
    Returns what was done, for the log."""
    run_dir = Path(run_dir)
    shutil.rmtree(run_dir / SPOOL_DIR, ignore_errors=True)
    path = run_dir / EPISODES_FILE
    if not path.is_file():
        return "no earlier records"
    if not resume_step:
        import time

        target = run_dir / "previous" / time.strftime("%Y%m%d-%H%M%S") / EPISODES_FILE
        target.parent.mkdir(parents=True, exist_ok=True)
        path.replace(target)
        return f"an earlier run's records moved to {target}"
    dropped = trim_records(run_dir, resumed_step=resume_step, revalidates=revalidates)
    return f"{dropped} records after step {resume_step} dropped"


def trim_records(run_dir: Path, *, resumed_step: int, revalidates: bool) -> int:
    """The records of the steps verl runs again after resuming at `resumed_step`, dropped; how many."""
    from beyondagent_core.jsonl import BadRecords, json_lines

    path = Path(run_dir) / EPISODES_FILE
    if not path.is_file():
        return 0
    records = [obj for _, _, obj in json_lines(path, BadRecords("skip")) if isinstance(obj, dict)]

    def kept(record: dict[str, Any]) -> bool:
        step = record.get("step")
        if not isinstance(step, int):
            return True
        return step < resumed_step or (step == resumed_step and not (revalidates and record.get("split") != "train"))

    kept_records = [r for r in records if kept(r)]
    if len(kept_records) != len(records):
        write_jsonl(path, kept_records)
    return len(records) - len(kept_records)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else -1
