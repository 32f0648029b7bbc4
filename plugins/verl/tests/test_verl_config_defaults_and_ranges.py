"""The verl backend's `backend:` block (config.py): its documented defaults, and each number's range
exactly at its edge (accepted) and one step past it (refused, naming the key). Main venv, no verl.

The defaults are the ones config.py's fields and docs/verl.md state: the whole batch as one
mini-batch (`mini_batch_size: null`), greedy validation (`val_temperature: 0`), a synchronous
rollout lagging one version when made asynchronous, no warm-up, checkpoints or validation unless
asked (0), two checkpoints kept, verl's own stack on a GPU.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from beyondagent_plugin_verl.config import RESUMABLE_KEYS, VerlConfig

DEFAULTS = {
    "epochs": 1, "total_steps": None, "batch_size": 8, "lr": 1e-6, "warmup_steps": 0, "weight_decay": 0.01,
    "grad_clip": 1.0, "ppo_epochs": 1, "mini_batch_size": None, "micro_batch_size": 4, "temperature": 1.0,
    "top_p": 1.0, "max_new_tokens": 512, "max_prompt_tokens": 2048, "max_response_tokens": 8192,
    "val_temperature": 0.0, "rollout_mode": "sync", "max_staleness": 1, "tis_cap": 2.0, "device": "cuda",
    "nodes": 1, "gpus_per_node": 1, "tensor_parallel": 1, "gpu_memory_utilization": 0.6, "ray_address": None,
    "eval_every": 0, "save_every": 0, "keep_checkpoints": 2, "project": "beyondagent", "timeout_s": None, "verl": {},
}


def test_the_documented_defaults() -> None:
    assert attrs.asdict(VerlConfig()) == DEFAULTS
    # what may change between a run and its --resume: length, checkpoints, validation, the time limit
    assert set(RESUMABLE_KEYS) == {"epochs", "total_steps", "save_every", "eval_every", "keep_checkpoints", "timeout_s"}


# key -> (the value at the edge of its range, accepted; the nearest value past it, refused)
EDGES: dict[str, tuple[Any, Any]] = {
    "epochs": (1, 0),
    "total_steps": (1, 0),
    "batch_size": (1, 0),
    "lr": (1e-12, 0.0),
    "warmup_steps": (0, -1),
    "weight_decay": (0.0, -0.01),
    "grad_clip": (1e-6, 0.0),
    "ppo_epochs": (1, 0),
    "mini_batch_size": (1, 0),
    "micro_batch_size": (1, 0),
    "temperature": (0.0, -0.1),
    "top_p": (1.0, 1.01),
    "max_new_tokens": (1, 0),
    "max_prompt_tokens": (1, 0),
    "max_response_tokens": (512, 511),  # at least a turn's max_new_tokens (512 by default)
    "val_temperature": (0.0, -0.1),
    "max_staleness": (1, 0),
    "tis_cap": (1e-6, 0.0),
    "nodes": (1, 0),
    "gpus_per_node": (1, 0),
    "tensor_parallel": (1, 0),
    "gpu_memory_utilization": (1.0, 1.01),
    "eval_every": (0, -1),
    "save_every": (0, -1),
    "keep_checkpoints": (1, 0),
    "timeout_s": (1, 0),
}


def test_every_number_of_the_block_has_its_edge_here() -> None:
    numbers = {field.name for field in attrs.fields(VerlConfig) if field.validator is not None}
    assert numbers == set(EDGES)


@pytest.mark.parametrize("key", sorted(EDGES))
def test_a_number_at_its_edge_is_accepted_and_one_past_it_refused_naming_it(key: str) -> None:
    edge, past = EDGES[key]
    assert getattr(VerlConfig(**{key: edge}), key) == edge
    with pytest.raises(ValueError, match=key):
        VerlConfig(**{key: past})


@pytest.mark.parametrize(("key", "value", "words"), [
    ("rollout_mode", "fully_async", "rollout_mode must be one of sync, one_step_off, async, got 'fully_async'"),
    ("device", "tpu", "device must be one of cuda, cpu, got 'tpu'"),
])
def test_a_name_outside_the_choices_is_refused_with_them(key: str, value: str, words: str) -> None:
    with pytest.raises(ValueError) as caught:
        VerlConfig(**{key: value})
    assert words in str(caught.value)
    for name in ("one_step_off", "async") if key == "rollout_mode" else ("cpu",):
        assert getattr(VerlConfig(**{key: name}), key) == name
