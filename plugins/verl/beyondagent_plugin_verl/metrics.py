"""verl's step metrics -> the names our `metrics.jsonl` uses (`beyondagent_core.metric_names`).

verl's file logger (`trainer.logger: file`, `VERL_FILE_LOGGER_PATH`) writes one JSON line per step,
`{"step": N, "data": {"critic/score/mean": ..., ...}}`. Each mapped name below is the same string
as in `beyondagent_core.metric_names` (a test checks it), so the report, TensorBoard and
the viewer read both backends' runs alike. verl's own names are kept too, under `verl/`.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from beyondagent_core.advantages import dropped_counts
from beyondagent_core.metric_names import (
    ADVANTAGE_PREFIX,
    EXPERIENCE_PREFIX,
    GATEWAY_CALLS_PER_EPISODE,
    GATEWAY_SAMPLES_PER_EPISODE,
    GATEWAY_SPLIT_EPISODES,
    TRAIN_SUCCESS_RATE_GUIDED,
    TRAIN_SUCCESS_RATE_PREFIXED,
    TRAIN_SUCCESS_RATE_UNGUIDED,
)

# our name <- verl's name (first found wins)
MAPPING: dict[str, tuple[str, ...]] = {
    "train/reward_mean": ("critic/score/mean", "critic/rewards/mean"),
    "train/response_length": ("response_length/mean",),
    "train/turns": ("num_turns/mean",),
    "actor/kl": ("actor/kl_loss", "actor/ppo_kl"),
    "actor/clip_fraction": ("actor/pg_clipfrac",),
    "actor/entropy": ("actor/entropy",),
    "actor/grad_norm": ("actor/grad_norm",),
    "actor/pg_loss": ("actor/pg_loss",),
    "actor/lr": ("actor/lr",),
    "perf/tokens_per_s": ("perf/throughput",),
    "perf/step_time_s": ("timing_s/step",),
    "perf/max_memory_allocated_gb": ("perf/max_memory_allocated_gb",),  # the actor update's peaks
    "perf/max_memory_reserved_gb": ("perf/max_memory_reserved_gb",),
    "epoch": ("training/epoch",),
}
# verl's validation metrics: `val-core/<data source>/<var>/mean@<n>` for its core variable (our
# loop reports `acc`, the judge's success) and `val-aux/...` for the rest (`reward`).
VAL_PASS_AT_1 = "val/pass@1"
VAL_REWARD_MEAN = "val/reward_mean"
VAL_SOURCES = {VAL_PASS_AT_1: "acc", VAL_REWARD_MEAN: "reward"}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, numbers.Number):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _is_val_mean(name: str, var: str) -> bool:
    """verl's `<section>/<data source>/<var>/mean@N`; read from both ends, as a data source may hold a "/"
    itself (verl's GSM8K parquet names its source `openai/gsm8k`)."""
    parts = name.split("/")
    return (len(parts) >= 4 and parts[0] in ("val-core", "val-aux") and parts[-2] == var
            and parts[-1].startswith("mean@"))


def map_step(verl_metrics: dict[str, Any]) -> dict[str, Any]:
    """One verl step's metrics -> ours, plus every numeric verl metric as `verl/<name>`."""
    out: dict[str, Any] = {}
    for ours, theirs in MAPPING.items():
        for name in theirs:
            value = _number(verl_metrics.get(name))
            if value is not None:
                out[ours] = value
                break
    for ours, var in VAL_SOURCES.items():
        values = [_number(v) for k, v in verl_metrics.items() if _is_val_mean(k, var)]
        values = [v for v in values if v is not None]
        if values:  # the mean over data sources
            out[ours] = sum(values) / len(values)
    for name, value in verl_metrics.items():
        number = _number(value)
        if number is not None:
            out[f"verl/{name}"] = number
            if name.startswith((ADVANTAGE_PREFIX, EXPERIENCE_PREFIX)):  # our trainer's metrics keep torch's names
                out[name] = number
    return out


def episode_metrics(episodes: list[dict[str, Any]]) -> dict[str, float]:
    """A training step's success rates from our agent loop's episode records (torch's names)."""
    if not episodes:
        return {}
    out = {"train/success_rate": sum(bool(e.get("success")) for e in episodes) / len(episodes)}
    synthetic = [e for e in episodes if e.get("origin") == "synthetic"]
    if synthetic:
        original = [e for e in episodes if e.get("origin") != "synthetic"]
        out["train/synthetic_fraction"] = len(synthetic) / len(episodes)
        out["train/success_rate_synthetic"] = sum(bool(e.get("success")) for e in synthetic) / len(synthetic)
        if original:
            out["train/success_rate_original"] = sum(bool(e.get("success")) for e in original) / len(original)
    if any("guided" in e for e in episodes):  # experience-guided rollouts: success with and without lessons,
        # and (experience.prefix_ratio) from a stored prefix, not counted as unguided
        kinds = ["guided" if e.get("guided") else "prefixed" if e.get("prefixed") else "unguided" for e in episodes]
        for name, kind in ((TRAIN_SUCCESS_RATE_GUIDED, "guided"), (TRAIN_SUCCESS_RATE_PREFIXED, "prefixed"),
                           (TRAIN_SUCCESS_RATE_UNGUIDED, "unguided")):
            chosen = [bool(e.get("success")) for e, k in zip(episodes, kinds) if k == kind]
            if chosen:
                out[name] = sum(chosen) / len(chosen)
    served = [e for e in episodes if "gateway_calls" in e]  # `agent` episodes: the torch backend's gateway metrics
    if served:
        out[GATEWAY_SPLIT_EPISODES] = sum(e.get("gateway_splits", 0) > 0 for e in served) / len(served)
        out[GATEWAY_SAMPLES_PER_EPISODE] = sum(e.get("gateway_samples", 0) for e in served) / len(served)
        out[GATEWAY_CALLS_PER_EPISODE] = sum(e["gateway_calls"] for e in served) / len(served)
    out.update(dropped_metrics(episodes))
    return out


def dropped_metrics(episodes: list[dict[str, Any]]) -> dict[str, float]:
    """In verl's V1 trainers with verl's estimator, the episodes `group_gate` kept out of their groups'
    statistics (by reason) and the groups it skipped: the names our estimator's path logs."""
    gated = [e for e in episodes if e.get("gated")]
    if not gated:
        return {}
    counts = dropped_counts((e.get("dropped") or None for e in gated),
                            len({e["group_skipped"] for e in gated if e.get("group_skipped")}))
    return {ADVANTAGE_PREFIX + name: value for name, value in counts.items()}


def val_experience_metrics(val: list[dict[str, Any]]) -> dict[str, float]:
    """With `experience.val_mode: all`: the share of a validation's episodes shown experiences and the
    records of the task being scored that the guard dropped (the torch backend's names)."""
    shown = [e for e in val if "leaks_blocked" in e]
    if not shown:
        return {}
    return {"experience/val_guided_fraction": sum(bool(e.get("guided")) for e in shown) / len(shown),
            "experience/val_leaks_blocked": float(sum(int(e.get("leaks_blocked") or 0) for e in shown))}
