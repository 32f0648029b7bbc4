"""`model.gradient_checkpointing`: the same update, recomputed layer by layer in the backward pass.

Real throughout: the tiny model, its decoder layers counted by forward hooks, peft's adapters, and
the quickstart run end to end (rollouts keep their KV cache; training changes nothing but memory).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch
from beyondagent_plugin_torch.config import TorchConfig
from beyondagent_plugin_torch.lora import with_adapters
from beyondagent_plugin_torch.models import enable_gradient_checkpointing, load_policy
from beyondagent_plugin_torch.update import grpo_update, make_batch
from safetensors.torch import load_file
from test_update import episodes_for

from beyondagent_core.errors import SpecError
from beyondagent_core.spec import AlgorithmSection, LoraSection

ROOT = Path(__file__).resolve().parents[3]
QUICKSTART = ROOT / "examples" / "quickstart.yaml"


def update_counting_layer_calls(model, batch, algorithm) -> tuple[dict[str, torch.Tensor], int]:
    """The weights after one SGD update and how often the first decoder layer's MLP started a forward
    pass (a layer's own hooks stay outside its checkpoint; its modules' hooks run again in the
    recompute, which stops as soon as it has what the backward needs: a pre-hook sees it start)."""
    model = model.train()
    calls = []
    mlp = next(m for name, m in model.named_modules() if name.endswith("layers.0.mlp"))
    hook = mlp.register_forward_pre_hook(lambda *args: calls.append(1))
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    grpo_update(model, None, optimizer, batch, algorithm=algorithm, config=TorchConfig(micro_batch_size=4),
                temperature=1.0, generator=torch.Generator().manual_seed(0))
    hook.remove()
    return {name: p.detach().clone() for name, p in model.named_parameters() if p.requires_grad}, len(calls)


@pytest.mark.parametrize("adapters", [False, True], ids=["full", "lora"])
def test_checkpointing_recomputes_each_layer_and_gives_the_same_update(adapters: bool) -> None:
    base, tokenizer = load_policy("tiny", dtype="float32")
    if adapters:
        base = with_adapters(base, LoraSection(rank=4, alpha=8), seed=0)
    episodes, advantages = episodes_for(tokenizer, 8)
    batch = make_batch(episodes, advantages, pad_token_id=tokenizer.pad_token_id, device=torch.device("cpu"))
    algorithm = AlgorithmSection(kl_coef=0.0)
    plain, plain_calls = update_counting_layer_calls(copy.deepcopy(base), batch, algorithm)
    checkpointed_model = copy.deepcopy(base)
    enable_gradient_checkpointing(checkpointed_model)
    checkpointed, checkpointed_calls = update_counting_layer_calls(checkpointed_model, batch, algorithm)
    # two micro-batches: a layer runs once per micro-batch, and once more in its backward when checkpointed
    assert plain_calls == 2 and checkpointed_calls == 4
    assert plain.keys() == checkpointed.keys() and plain
    for name, weights in plain.items():
        assert torch.allclose(weights, checkpointed[name], atol=1e-6), name
    if adapters:  # the gradient reached the adapters through the frozen, checkpointed layers
        start = dict(base.named_parameters())
        assert any(not torch.equal(weights, start[name]) for name, weights in checkpointed.items() if "lora_B" in name)


def test_a_model_without_checkpointing_support_is_a_spec_error() -> None:
    class Plain(torch.nn.Module):
        supports_gradient_checkpointing = False

    with pytest.raises(SpecError, match="does not support gradient checkpointing") as error:
        enable_gradient_checkpointing(Plain(), where="spec.yaml, key model.gradient_checkpointing")
    assert error.value.where == "spec.yaml, key model.gradient_checkpointing"


@pytest.mark.beyondagent_plugins("gym", "mixers", "torch")
def test_a_checkpointed_run_equals_the_plain_run_and_may_resume_with_it_switched(run_spec, tmp_path: Path,
                                                                                  monkeypatch) -> None:
    from beyondagent_plugin_torch import trainer

    switched_on = []  # the models the trainer switched checkpointing on in (the runs alone cannot tell)

    def spy(model, **kwargs):
        enable_gradient_checkpointing(model, **kwargs)
        switched_on.append(model)

    monkeypatch.setattr(trainer, "enable_gradient_checkpointing", spy)
    small = ("backend.batch_size=2", "algorithm.group_size=4", "backend.eval_every=0", "backend.save_every=1",
             "tasks.train.count=4", "tasks.val.count=4", "backend.report=false", "backend.lr=0.01",
             "algorithm.kl_coef=0.01")
    plain = run_spec(QUICKSTART, *small, "backend.total_steps=2", f"run.output_dir={tmp_path / 'plain'}")
    checkpointed = run_spec(QUICKSTART, *small, "backend.total_steps=1", "model.gradient_checkpointing=true",
                            f"run.output_dir={tmp_path / 'switched'}")
    assert len(switched_on) == 1  # the checkpointed run only
    name = "is_activation_checkpointing" if hasattr(type(switched_on[0]), "is_activation_checkpointing") \
        else "is_gradient_checkpointing"  # its name from transformers 5.x on
    assert getattr(switched_on[0], name)
    state = json.loads((checkpointed.run_dir / "checkpoints" / "step_000001" / "state.json").read_text())
    assert state["spec"]["model"]["gradient_checkpointing"] is True
    # resumed without it (a changed memory setting is no reason to refuse): step 2 equals the plain run's
    run_spec(QUICKSTART, *small, "backend.total_steps=2", f"run.output_dir={tmp_path / 'switched'}", resume=True)

    def rows(run_dir: Path) -> dict[int, dict]:
        lines = (run_dir / "metrics.jsonl").read_text().splitlines()
        return {row["step"]: row for row in map(json.loads, lines) if "actor/pg_loss" in row}

    plain_rows, switched_rows = rows(plain.run_dir), rows(checkpointed.run_dir)
    for step in (1, 2):
        for key in ("train/reward_mean", "actor/pg_loss", "actor/grad_norm", "actor/entropy", "actor/kl"):
            assert switched_rows[step][key] == pytest.approx(plain_rows[step][key], rel=1e-4, abs=1e-6), (step, key)
    # resumed with it switched on again: the model the checkpoint restored is the one checkpointing, and
    # the one that trained (not the model loaded before the checkpoint replaced it)
    run_spec(QUICKSTART, *small, "backend.total_steps=3", "model.gradient_checkpointing=true",
             f"run.output_dir={tmp_path / 'switched'}", resume=True)
    saved = load_file(checkpointed.run_dir / "checkpoints" / "step_000003" / "model" / "model.safetensors")
    trained = switched_on[-1].state_dict()
    assert len(switched_on) == 2 and all(torch.equal(trained[name], saved[name]) for name in saved)
