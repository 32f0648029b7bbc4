"""verl's step metrics -> the names our `metrics.jsonl` uses (the torch backend's `metric_names`).

verl's file logger (`trainer.logger: file`, `VERL_FILE_LOGGER_PATH`) writes one JSON line per step,
`{"step": N, "data": {"critic/score/mean": ..., ...}}`. Each mapped name below is the same string
as in `beyondagent_plugin_torch.metric_names` (a test checks it), so the report, TensorBoard and
the viewer read both backends' runs alike. verl's own names are kept too, under `verl/`.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

# our name <- verl's name (first found wins)
MAPPING: dict[str, tuple[str, ...]] = {
    "train/reward_mean": ("critic/score/mean", "critic/rewards/mean"),
    "train/success_rate": ("beyondagent/success_rate",),
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
    "epoch": ("training/epoch",),
}
VAL_REWARD_PREFIX = "val-core/"
VAL_REWARD_MEAN = "val/reward_mean"


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, numbers.Number):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def map_step(verl_metrics: dict[str, Any]) -> dict[str, Any]:
    """One verl step's metrics -> ours, plus every numeric verl metric as `verl/<name>`."""
    out: dict[str, Any] = {}
    for ours, theirs in MAPPING.items():
        for name in theirs:
            value = _number(verl_metrics.get(name))
            if value is not None:
                out[ours] = value
                break
    val = [v for k, v in verl_metrics.items() if k.startswith(VAL_REWARD_PREFIX) and "/mean@" in k
           and _number(v) is not None]
    if val:
        out[VAL_REWARD_MEAN] = sum(float(v) for v in val) / len(val)
    for name, value in verl_metrics.items():
        number = _number(value)
        if number is not None:
            out[f"verl/{name}"] = number
    return out
