"""What a checkpoint restores, and which spec changes a resume accepts (eighth mutation audit).

`load_training_state` puts back AdamW's moments, the LR scheduler's position and the random
generators (torch's, on a GPU CUDA's, and Python's) as `save_checkpoint` found them, whatever ran in
between; a checkpoint saved without CUDA's state (on a CPU, or before it was saved) still loads.
`check_resumable` accepts changes anywhere under a volatile prefix (`logging`, `plugins`,
`run.output_dir`, `model.gradient_checkpointing`, the backend's resumable keys), nested keys
included, and still refuses, by name, a change that matters.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch
from beyondagent_plugin_torch.checkpoint import (
    Checkpoint,
    check_resumable,
    latest_checkpoint,
    load_training_state,
    save_checkpoint,
)
from beyondagent_plugin_torch.models import load_policy

from beyondagent_core.errors import RunError


def test_a_checkpoint_restores_the_optimizer_the_schedule_and_both_generators(tmp_path: Path) -> None:
    model, tokenizer = load_policy("tiny")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 0.5 ** step)
    model(input_ids=torch.tensor([[5, 17, 42, 7]])).logits.float().logsumexp(-1).sum().backward()
    optimizer.step()
    scheduler.step()
    torch.manual_seed(1234)  # on a GPU this seeds its generators too
    random.seed(1234)
    save_checkpoint(tmp_path, 3, model=model, tokenizer=tokenizer, optimizer=optimizer, scheduler=scheduler,
                    spec={"run": {"name": "state"}}, keep=2)
    torch_next, python_next = torch.rand(4), [random.random() for _ in range(4)]
    cuda_next = torch.rand(4, device="cuda") if torch.cuda.is_available() else None
    moments = {i: optimizer.state[p]["exp_avg"].clone() for i, p in enumerate(model.parameters())}

    fresh = torch.optim.AdamW(model.parameters(), lr=1e-2)
    fresh_schedule = torch.optim.lr_scheduler.LambdaLR(fresh, lambda step: 0.5 ** step)
    torch.manual_seed(99)  # whatever ran since: other draws
    random.seed(99)
    load_training_state(latest_checkpoint(tmp_path), optimizer=fresh, scheduler=fresh_schedule)

    assert torch.equal(torch.rand(4), torch_next), "torch's generator is not where the checkpoint left it"
    assert [random.random() for _ in range(4)] == python_next, "Python's generator is not where the checkpoint left it"
    if cuda_next is not None:  # a GPU machine (scripts/gpu): LoRA's dropout draws from it
        assert torch.equal(torch.rand(4, device="cuda"), cuda_next), "CUDA's generator is not where it was left"
    for i, p in enumerate(model.parameters()):
        assert torch.equal(fresh.state[p]["exp_avg"], moments[i])
        assert float(fresh.state[p]["step"]) == 1.0
    assert fresh_schedule.last_epoch == 1 and fresh.param_groups[0]["lr"] == pytest.approx(0.5e-2)


def saved_spec() -> dict:
    return {"run": {"name": "r", "output_dir": "/runs/a"},
            "model": {"path": "tiny", "gradient_checkpointing": False},
            "logging": {"level": "info", "episodes": "0.1"},
            "plugins": {"require": [], "settings": {"notify": {"url": "https://example.invalid/a"}}},
            "backend": {"name": "torch", "lr": 0.01, "eval_every": 0, "kv_cache": {"tokens": 10}}}


def test_changes_under_a_volatile_prefix_resume_nested_keys_included(tmp_path: Path) -> None:
    new = saved_spec()
    new["run"]["output_dir"] = "/runs/b"
    new["model"]["gradient_checkpointing"] = True
    new["logging"]["episodes"] = "all"
    new["plugins"]["settings"]["notify"]["url"] = "https://example.invalid/b"
    new["backend"]["eval_every"] = 5
    check_resumable(Checkpoint(tmp_path, 2, saved_spec()), new, backend_volatile=("eval_every", "kv_cache"),
                    spec_path="spec.yaml")
    new["backend"]["kv_cache"]["tokens"] = 20  # a nested key under a volatile backend key
    check_resumable(Checkpoint(tmp_path, 2, saved_spec()), new, backend_volatile=("eval_every", "kv_cache"),
                    spec_path="spec.yaml")


def test_a_change_that_matters_is_refused_by_name(tmp_path: Path) -> None:
    new = saved_spec()
    new["logging"]["episodes"] = "all"
    new["backend"]["lr"] = 0.02
    new["model"]["path"] = "other"
    with pytest.raises(RunError) as caught:
        check_resumable(Checkpoint(tmp_path, 2, saved_spec()), new, backend_volatile=("eval_every",),
                        spec_path="spec.yaml")
    message = str(caught.value)
    assert "backend.lr" in message and "model.path" in message and "logging" not in message


def test_a_checkpoint_without_cudas_generator_state_loads(tmp_path: Path) -> None:
    model, tokenizer = load_policy("tiny")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    final = save_checkpoint(tmp_path, 1, model=model, tokenizer=tokenizer, optimizer=optimizer, scheduler=scheduler,
                            spec={"run": {"name": "state"}}, keep=1)
    state = torch.load(final / "optimizer.pt", weights_only=False)
    assert "cuda_rng" in state and (state["cuda_rng"] is None) == (not torch.cuda.is_available())
    del state["cuda_rng"]  # as an older checkpoint was written
    torch.save(state, final / "optimizer.pt")
    load_training_state(latest_checkpoint(tmp_path), optimizer=optimizer, scheduler=scheduler)
