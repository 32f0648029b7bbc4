"""Training precision (precision.py): float32 weights and AdamW state, bf16 compute, pure bf16 only when asked.

The end-to-end test is the one that caught issue 33: with `model.dtype: bfloat16` (what `auto` is on
a GPU) the whole model used to be stored in bf16, and AdamW's updates at a real model's learning
rate were rounded away. It runs on a CPU with bf16 compute, the tiny model and the math example.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
import torch
from beyondagent_plugin_torch.checkpoint import checkpoints
from beyondagent_plugin_torch.config import TorchConfig
from beyondagent_plugin_torch.lora import with_adapters
from beyondagent_plugin_torch.models import load_policy
from beyondagent_plugin_torch.precision import RolloutWeights, compute_in, resolve_precision
from beyondagent_plugin_torch.update import grpo_update, make_batch
from structlog.testing import capture_logs
from test_update import episodes_for

from beyondagent_core.errors import SpecError
from beyondagent_core.spec import AlgorithmSection, LoraSection

ROOT = Path(__file__).resolve().parents[3]
MATH = ROOT / "examples" / "math_arithmetic.yaml"
CPU = torch.device("cpu")


# --- the spec's two keys ----------------------------------------------------------------------

def test_weights_stay_float32_unless_param_dtype_asks_otherwise() -> None:
    assert resolve_precision("auto", "float32", CPU) == resolve_precision("float32", "float32", CPU)
    assert not resolve_precision("auto", "float32", CPU).mixed  # CPU: float32 throughout
    mixed = resolve_precision("bfloat16", "float32", CPU)
    assert (mixed.params, mixed.compute, mixed.mixed) == (torch.float32, torch.bfloat16, True)
    assert mixed.describe() == "float32 weights, bfloat16 compute"


def test_auto_on_a_bf16_gpu_is_bf16_compute_over_float32_weights(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # the rule, without a GPU here
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: True)
    precision = resolve_precision("auto", "float32", torch.device("cuda"))
    assert (precision.params, precision.compute) == (torch.float32, torch.bfloat16)


def test_pure_bf16_only_when_asked_and_with_a_warning() -> None:
    with capture_logs() as logs:
        pure = resolve_precision("auto", "bfloat16", CPU)
    assert (pure.params, pure.compute, pure.mixed) == (torch.bfloat16, torch.bfloat16, False)
    warning = next(entry for entry in logs if entry["event"] == "train.pure_low_precision")
    assert warning["log_level"] == "warning" and "rounded away" in warning["message"]
    with capture_logs() as logs:
        resolve_precision("bfloat16", "float32", CPU)
    assert not [entry for entry in logs if entry["event"] == "train.pure_low_precision"]


def test_contradictory_or_unsupported_precisions_are_spec_errors() -> None:
    with pytest.raises(SpecError) as caught:
        resolve_precision("float32", "bfloat16", CPU, where="spec.yaml")
    assert caught.value.where == "spec.yaml, key model.dtype" and "model.param_dtype: float32" in caught.value.hint
    with pytest.raises(SpecError) as caught:  # fp16 over fp32 weights needs a loss scaler we do not have
        resolve_precision("float16", "float32", CPU, where="spec.yaml")
    assert caught.value.where == "spec.yaml, key model.dtype" and "loss scaling" in caught.value.message
    with pytest.raises(SpecError) as caught:
        resolve_precision("auto", "float64", CPU, where="spec.yaml")
    assert caught.value.where == "spec.yaml, key model.param_dtype" and "valid: float32" in caught.value.message


# --- autocast over float32 weights ------------------------------------------------------------

def test_forwards_compute_in_bf16_while_weights_and_gradients_stay_float32() -> None:
    model, _ = load_policy("tiny", dtype=torch.float32, compute_dtype=torch.bfloat16)
    ids = torch.tensor([[5, 17, 42, 7, 99]])
    logits = model(input_ids=ids).logits
    assert logits.dtype == torch.bfloat16
    logits.float().logsumexp(-1).sum().backward()
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    assert all(p.grad is not None and p.grad.dtype == torch.float32 for p in model.parameters() if p.requires_grad)
    # the KL reference is a deep copy: its forward must run its own weights
    reference = copy.deepcopy(model)
    with torch.no_grad():
        for parameter in reference.parameters():
            parameter.mul_(0.5)
        assert not torch.equal(reference(input_ids=ids).logits, model(input_ids=ids).logits)
        assert reference(input_ids=ids).logits.dtype == torch.bfloat16
    assert compute_in(model, torch.bfloat16) is model and model.plain_forward is type(model).forward


def test_lora_adapters_and_their_gradients_are_float32_under_bf16_compute() -> None:
    model, _ = load_policy("tiny", dtype=torch.float32, compute_dtype=torch.bfloat16)
    model = with_adapters(model, LoraSection(rank=4, alpha=8), seed=0)
    logits = model(input_ids=torch.tensor([[5, 17, 42]])).logits
    assert logits.dtype == torch.bfloat16  # peft calls the base model's (autocast) forward
    logits.float().sum().backward()
    trained = [p for p in model.parameters() if p.requires_grad]
    assert trained and all(p.dtype == torch.float32 and p.grad is not None for p in trained)


def weight_change(model: torch.nn.Module, start: dict[str, torch.Tensor]) -> torch.Tensor:
    return torch.cat([(p.detach().float() - start[name]).flatten() for name, p in model.named_parameters()])


def test_small_updates_survive_bf16_compute_but_not_bf16_weights() -> None:
    """Five AdamW steps at lr 1e-5 on one batch: the weights move as in float32 (relative error under
    0.1: what bf16's ~3 significant digits in the forward leave of Adam's per-weight step) with bf16
    compute over float32 weights; with bf16 weights nearly all of the change is rounded away."""
    base, tokenizer = load_policy("tiny", dtype=torch.float32)
    start = {name: p.detach().clone() for name, p in base.named_parameters()}
    episodes, advantages = episodes_for(tokenizer, 8)
    batch = make_batch(episodes, advantages, pad_token_id=tokenizer.pad_token_id, device=CPU)
    changes = {}
    for mode, (params, compute) in {"float32": (torch.float32, torch.float32),
                                    "mixed": (torch.float32, torch.bfloat16),
                                    "pure_bf16": (torch.bfloat16, torch.bfloat16)}.items():
        model = copy.deepcopy(base).to(params).train()
        if compute != params:
            compute_in(model, compute)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, weight_decay=0.0)
        for _ in range(5):
            grpo_update(model, None, optimizer, batch, algorithm=AlgorithmSection(kl_coef=0.0),
                        config=TorchConfig(micro_batch_size=8), temperature=1.0,
                        generator=torch.Generator().manual_seed(0))
        changes[mode] = weight_change(model, start)
    reference = changes["float32"]
    error = {mode: float((change - reference).norm() / reference.norm()) for mode, change in changes.items()}
    assert error["mixed"] < 0.1, error
    assert error["pure_bf16"] > 0.5, error  # what the default did on a GPU before issue 33


@pytest.mark.beyondagent_plugins("math", "mixers", "torch")
def test_the_default_gpu_configuration_moves_the_weights_as_float32_does(run_spec) -> None:
    """Issue 33's failure, end to end: `beyondagent run` with bf16 compute (what `model.dtype: auto`
    is on a GPU) at a real model's learning rate. Two GRPO steps at lr 1e-5 move the saved weights
    as far as float32 training does: AdamW's first steps move each weight by about `lr` whatever the
    batch (the bias-corrected m / sqrt(v) is about +-1), so the two runs' changes have about the same
    norm although their rollouts differ (ratio within 0.8..1.25), and every weight with a gradient
    moves. Before the fix the model was stored in bf16: only the weights near 0 (whose bf16 spacing is
    finer than the update) moved, 12% of them; `model.param_dtype: bfloat16` still shows it."""
    initial, _ = load_policy("tiny", dtype=torch.float32)
    start = {name: p.detach().clone() for name, p in initial.named_parameters()}
    norms, moved = {}, {}
    runs = {"float32": (["model.dtype=float32"], torch.float32),
            "bf16_compute": (["model.dtype=bfloat16"], torch.float32),
            "pure_bf16": (["model.dtype=bfloat16", "model.param_dtype=bfloat16"], torch.bfloat16)}
    for mode, (overrides, stored) in runs.items():
        run = run_spec(MATH, *overrides, f"run.name={mode}", "backend.lr=1e-5", "backend.warmup_steps=0",
                       "backend.total_steps=2", "backend.save_every=2", "backend.eval_every=0", "backend.report=false",
                       "tasks.val=null", "backend.samples_per_step=0")
        saved, _ = load_policy(str(checkpoints(run.run_dir)[0].path / "model"), dtype=torch.float32)
        # from the starting weights as that run stored them (bf16 rounds them once at load)
        change = weight_change(saved, {n: w.to(stored).float() for n, w in start.items()})
        norms[mode], moved[mode] = float(change.norm()), float((change != 0).float().mean())
    expected = 1e-5 * math.sqrt(sum(p.numel() for p in start.values()))  # ~lr per weight
    assert 0.3 * expected < norms["float32"] < 3 * expected, norms
    assert 0.8 < norms["bf16_compute"] / norms["float32"] < 1.25, norms
    # every weight with a gradient moves (measured: all but 0.004%); in bf16 storage only those near 0 do (12%)
    assert moved["float32"] > 0.99 and moved["bf16_compute"] > 0.99, moved
    assert moved["pure_bf16"] < 0.5 and norms["pure_bf16"] < 0.6 * norms["float32"], (moved, norms)


# --- the rollout's bf16 copy ------------------------------------------------------------------

@pytest.mark.parametrize("adapters", [False, True], ids=["full", "lora"])
def test_the_rollout_copy_is_bf16_and_follows_every_optimizer_step(adapters: bool) -> None:
    precision = resolve_precision("bfloat16", "float32", CPU)
    model, tokenizer = load_policy("tiny", dtype=precision.params, compute_dtype=precision.compute)
    if adapters:
        model = with_adapters(model, LoraSection(rank=4, alpha=8), seed=0)
    trained = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trained, lr=1e-2)
    rollout = RolloutWeights(model, precision)
    rollout.follow(optimizer)
    assert rollout.copied and rollout.model is not model
    assert {p.dtype for p in rollout.model.parameters()} == {torch.bfloat16}
    assert not any(p.requires_grad for p in rollout.model.parameters())
    assert "forward" not in vars(rollout.model)  # its own dtype, no autocast on top
    episodes, advantages = episodes_for(tokenizer, 4)
    batch = make_batch(episodes, advantages, pad_token_id=tokenizer.pad_token_id, device=CPU)
    grpo_update(model.train(), None, optimizer, batch, algorithm=AlgorithmSection(kl_coef=0.0),
                config=TorchConfig(micro_batch_size=4), temperature=1.0, generator=torch.Generator().manual_seed(0))
    for copied, source in zip(rollout.model.parameters(), model.parameters()):
        assert torch.equal(copied, source.detach().to(torch.bfloat16))
    ids = torch.tensor([[5, 17, 42, 7]])
    with torch.no_grad():  # the copy samples what the policy computes, to bf16's rounding
        assert torch.allclose(rollout.model(input_ids=ids).logits.float(), model.eval()(input_ids=ids).logits.float(),
                              atol=0.1)


def test_without_mixed_precision_the_rollout_samples_the_policy_itself() -> None:
    model, _ = load_policy("tiny", dtype=torch.float32)
    rollout = RolloutWeights(model, resolve_precision("float32", "float32", CPU))
    assert rollout.model is model and not rollout.copied
    assert rollout.follow(torch.optim.AdamW(model.parameters())) is None


@pytest.mark.beyondagent_plugins("math", "mixers", "torch")
def test_rollout_is_weighs_a_sync_run_s_tokens_by_the_sampling_gap(run_spec) -> None:
    """`backend.rollout_is: true` applies the truncated importance weights in a sync run (the bf16 rollout
    copy's rounding); unset, a sync run has none."""
    rows = {}
    for flag in ("true", "null"):
        run = run_spec(MATH, f"run.name=is_{flag}", "model.dtype=bfloat16", f"backend.rollout_is={flag}",
                       "backend.total_steps=1", "backend.save_every=0", "tasks.val=null", "backend.report=false",
                       "backend.samples_per_step=0")
        rows[flag] = json.loads((run.run_dir / "metrics.jsonl").read_text().splitlines()[-1])
    assert 0.5 < rows["true"]["rollout_corr/rollout_is_mean"] <= 2.0  # min(exp(old - sampling), tis_cap)
    assert rows["true"]["rollout/logprob_diff"] > 0  # bf16 copy vs autocast trainer: a gap to weigh
    assert "rollout_corr/rollout_is_mean" not in rows["null"]
