"""Per-episode token records: `<run_dir>/episodes.jsonl`, what `beyondagent view` shows.

One JSON line per kept episode: where it came from (step, split, group, the seat it played in a
multi-seat episode, task, origin), how it
scored, its turns as text, and its token view — the ids, each token's text, the loss mask, the
log-probs recorded at sampling time and the per-token advantages the estimator produced — so a
wrong mask, a leaking template or a reward on the wrong thing can be seen token by token.

Which episodes are kept is the spec's `logging.episodes` (`EpisodeSampling`): `all`, `none`,
`failures` (episodes that did not succeed or errored) or a fraction of the GRPO groups (whole
groups, so the group view has every rollout of a task; at least one group per step and split).
Validation picks the same tasks at every evaluation (its hash leaves the step out), so two steps
can be compared on the same tasks.

On disk it is compact: each distinct token's text is stored once per record (`vocab`), the
mask is run-length encoded (`[zeros, ones, zeros, ...]`), log-probs are kept only where the
mask is 1 (rounded to 3 decimals), advantages are run-length encoded
`[[value, count], ...]` (GRPO's are constant per episode). `expand_tokens` turns a record back
into one row per token. No torch here: the backend hands in plain lists.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from typing import Any

import attrs

EPISODES_FILE = "episodes.jsonl"
SCHEMA_VERSION = 1
LOGPROB_DECIMALS = 3
ADVANTAGE_DECIMALS = 4
SAMPLING_WORDS = ("all", "none", "failures")
DEFAULT_EPISODES = "0.1"


def check_sampling(value: Any) -> str:
    """`value` as the canonical text of a `logging.episodes` setting; ValueError naming what is allowed."""
    text = str(value).strip().lower()
    if text in SAMPLING_WORDS:
        return text
    try:
        fraction = float(text)
    except ValueError:
        fraction = math.nan
    if not 0.0 <= fraction <= 1.0:  # NaN fails here too
        raise ValueError(f"logging.episodes must be all, none, failures or a fraction between 0 and 1 "
                         f"(the share of GRPO groups kept per step), got {value!r}")
    return repr(fraction)


@attrs.frozen
class EpisodeSampling:
    """Which episodes of a step are written (see the module docstring)."""

    setting: str = DEFAULT_EPISODES
    seed: int = 0

    def picked(self, step: int, split: str, groups: Sequence[Any], failed: Sequence[bool]) -> list[int]:
        """The indices of the episodes to keep, given each episode's group and whether it failed."""
        setting = check_sampling(self.setting)
        indices = range(len(groups))
        if setting == "all":
            return list(indices)
        if setting == "none":
            return []
        if setting == "failures":
            return [i for i in indices if failed[i]]
        fraction = float(setting)
        if fraction <= 0:
            return []
        when = step if split == "train" else "every evaluation"  # val: the same tasks each time
        ranks = {group: _unit_hash(self.seed, when, split, group) for group in groups}
        kept = {group for group, rank in ranks.items() if rank < fraction}
        if not kept and ranks:  # at least one group per step, so every step can be looked at
            kept = {min(ranks, key=ranks.__getitem__)}
        return [i for i in indices if groups[i] in kept]


def _unit_hash(*parts: object) -> float:
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "little") / 2**64


# -- writing ------------------------------------------------------------------------------------

def run_lengths(mask: Sequence[int]) -> list[int]:
    """`[0, 0, 1, 1, 1, 0]` -> `[2, 3, 1]`: alternating runs, the first one of zeros (maybe 0 long)."""
    runs: list[int] = []
    current, count = 0, 0
    for bit in mask:
        bit = 1 if bit else 0
        if bit == current:
            count += 1
        else:
            runs.append(count)
            current, count = bit, 1
    runs.append(count)
    return runs


def value_runs(values: Sequence[float], decimals: int = ADVANTAGE_DECIMALS) -> list[list[float | int | None]]:
    """`[a, a, b]` -> `[[a, 2], [b, 1]]` with each value rounded (None for a value that is not finite)."""
    runs: list[list[Any]] = []
    for value in values:
        value = float(value)
        rounded = round(value, decimals) + 0.0 if math.isfinite(value) else None  # + 0.0: no -0.0
        if runs and runs[-1][0] == rounded:
            runs[-1][1] += 1
        else:
            runs.append([rounded, 1])
    return runs


def token_view(ids: Sequence[int], mask: Sequence[int], logprobs: Sequence[float],
               advantages: Sequence[float] | None, pieces: Sequence[str],
               turn_spans: Sequence[tuple[int, int]] = (), prompt_length: int = 0) -> dict[str, Any]:
    """The compact token block of a record (see the module docstring)."""
    if not len(ids) == len(mask) == len(logprobs) == len(pieces):
        raise ValueError(f"token arrays differ in length: {len(ids)} ids, {len(mask)} mask, "
                         f"{len(logprobs)} log-probs, {len(pieces)} pieces")
    if advantages is not None and len(advantages) != len(ids):
        raise ValueError(f"{len(advantages)} advantages for {len(ids)} tokens")
    trained = [_rounded(lp, LOGPROB_DECIMALS) for lp, bit in zip(logprobs, mask, strict=True) if bit]
    return {
        "ids": [int(i) for i in ids],
        "vocab": {str(int(i)): piece for i, piece in zip(ids, pieces, strict=True)},
        "mask": run_lengths(mask),
        "logprobs": trained,
        "advantages": None if advantages is None else value_runs(advantages),
        "turn_spans": [[int(a), int(b)] for a, b in turn_spans],
        "prompt_length": int(prompt_length),
    }


def _rounded(value: float, decimals: int) -> float | None:
    value = float(value)
    return round(value, decimals) if math.isfinite(value) else None


def episode_record(*, step: int, split: str, index: int, group: Any, trajectory: Any,
                   tokens: dict[str, Any] | None, guided: bool = False, off_policy: bool = False,
                   step_values: Sequence[float] | None = None, policy_version: int | None = None) -> dict[str, Any]:
    """One line of `episodes.jsonl` for a finished `Trajectory` and its `token_view`; `step_values`
    are the advantage estimator's value per model turn where it gives them (ADCA's step rewards,
    GiGPO's step-level advantages); `policy_version`, the updates the policy had taken when it
    generated the episode (where the backend says: asynchronous rollout lags behind the step)."""
    task, reward = trajectory.task, trajectory.reward
    turns = [{"role": turn.role, "content": turn.content,
              **({"tool_calls": turn.tool_calls} if turn.tool_calls else {})} for turn in trajectory.turns]
    return {
        "schema_version": SCHEMA_VERSION,
        "step": int(step), "split": split, "index": int(index), "group": group, "seat": trajectory.seat,
        "task_id": task.task_id, "env": task.env, "origin": task.origin, "query": task.query,
        "seed_task_id": task.seed_task_id,
        "score": None if reward is None else _rounded(reward.score, 6),
        "success": bool(reward is not None and reward.success),
        "reason": None if reward is None else reward.reason,
        "details": None if reward is None else reward.details,
        "error": trajectory.error, "terminated": bool(trajectory.terminated), "metrics": dict(trajectory.metrics),
        "guided": bool(guided), "off_policy": bool(off_policy),
        "turns": turns,
        "tokens": tokens,
        "step_values": None if step_values is None else [_rounded(v, 4) for v in step_values],
        "policy_version": policy_version,
    }


class PieceCache:
    """Each token id's text, decoded once per run (`decode([id])` of a Hugging Face tokenizer)."""

    def __init__(self, decode_many: Callable[[list[list[int]]], list[str]]):
        self._decode_many = decode_many
        self._pieces: dict[int, str] = {}

    def pieces(self, ids: Sequence[int]) -> list[str]:
        missing = sorted({int(i) for i in ids} - self._pieces.keys())
        if missing:
            self._pieces.update(zip(missing, self._decode_many([[i] for i in missing]), strict=True))
        return [self._pieces[int(i)] for i in ids]


# -- reading ------------------------------------------------------------------------------------

def as_view_record(record: dict[str, Any]) -> dict[str, Any]:
    """A record as the viewer reads it: ours as they are; a line of `beyondagent eval`'s
    episodes.jsonl (`{"sample", "trajectory"}`) as split `eval`, step 0, grouped by task (its k
    samples side by side), without tokens."""
    sample, trajectory = record.get("sample"), record.get("trajectory")
    if "turns" in record or not isinstance(sample, dict) or not isinstance(trajectory, dict):
        return record
    reward = trajectory.get("reward") if isinstance(trajectory.get("reward"), dict) else {}
    task = trajectory.get("task") if isinstance(trajectory.get("task"), dict) else {}
    return {
        "schema_version": SCHEMA_VERSION, "step": 0, "split": "eval", "index": sample.get("index"),
        "group": sample.get("task_id"), "task_id": sample.get("task_id"), "env": task.get("env"),
        "origin": sample.get("origin"), "query": task.get("query"), "seed_task_id": task.get("seed_task_id"),
        "score": sample.get("score"), "success": bool(sample.get("success")), "reason": reward.get("reason"),
        "details": reward.get("details"), "error": sample.get("error"), "terminated": trajectory.get("terminated"),
        "metrics": trajectory.get("metrics"), "guided": False, "off_policy": False,
        "turns": [{key: turn.get(key) for key in ("role", "content", "tool_calls") if turn.get(key) is not None}
                  for turn in trajectory.get("turns") or [] if isinstance(turn, dict)],
        "tokens": None,
    }


def expand_mask(runs: Sequence[int]) -> list[int]:
    mask: list[int] = []
    for position, count in enumerate(runs):
        mask.extend([position % 2] * int(count))
    return mask


def expand_runs(runs: Sequence[Sequence[Any]] | None) -> list[float | None] | None:
    if runs is None:
        return None
    values: list[float | None] = []
    for value, count in runs:
        values.extend([value] * int(count))
    return values


def expand_tokens(record: dict[str, Any]) -> list[dict[str, Any]]:
    """One `{"id", "text", "mask", "logprob", "advantage"}` per token of a record ([] without tokens).

    A block whose arrays disagree (a damaged line) raises ValueError naming what differs.
    """
    block = record.get("tokens")
    if not isinstance(block, dict):
        return []
    ids, vocab = block.get("ids") or [], block.get("vocab") or {}
    pieces = [vocab.get(str(i), "\ufffd") for i in ids]
    mask = expand_mask(block.get("mask") or [])
    advantages = expand_runs(block.get("advantages"))
    logprobs = iter(block.get("logprobs") or [])
    if not len(ids) == len(pieces) == len(mask) or (advantages is not None and len(advantages) != len(ids)):
        raise ValueError(f"the token block is inconsistent: {len(ids)} ids, {len(pieces)} pieces, {len(mask)} mask "
                         f"positions, {'-' if advantages is None else len(advantages)} advantages")
    rows = []
    for position, (token_id, piece, bit) in enumerate(zip(ids, pieces, mask, strict=True)):
        rows.append({"id": token_id, "text": piece, "mask": bit,
                     "logprob": next(logprobs, None) if bit else None,
                     "advantage": None if advantages is None else advantages[position]})
    return rows


def token_count(record: dict[str, Any]) -> tuple[int, int]:
    """(all tokens, trained tokens) of a record, from its compact block."""
    block = record.get("tokens")
    if not isinstance(block, dict):
        return 0, 0
    runs = block.get("mask") or []
    return sum(int(n) for n in runs), sum(int(n) for n in runs[1::2])
