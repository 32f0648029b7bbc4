"""LoRA, gradient checkpointing and the SFT warm-up, class-wide: every key reaches its code, by hand.

- One real Trainer (the shrunk quickstart through the real pipeline, as test_torch_keys_reach.py builds
  it) with every `model.lora.*` key, `model.gradient_checkpointing` and every `algorithm.sft.*` key set to
  a value that cannot act like its default nor like the example's: peft's adapters on exactly the named
  modules with that rank, alpha and dropout, the optimizer over the adapters only, the KL reference the
  same weights with the adapters off, and the warm-up's own AdamW with `sft.lr` (else `backend.lr`),
  `sft.epochs`, `sft.batch_size`, `backend.micro_batch_size`, `backend.grad_clip` and its seed.
- The SFT loss against a hand computation from the model's raw logits: the NLL summed over the masked
  tokens of the whole batch, divided once by their count (not per example, not per micro-batch); a batch
  with no trained token takes no step; a non-finite gradient takes none either; the clip norm holds.
- eos vs end-of-turn on `tiny_eos` (eos `<|endoftext|>`, turns ending on `<|im_end|>`): the trainer's
  file examples are the chat template's own rendering, each trained turn ending on `<|im_end|>`; a
  relative `algorithm.sft.data` is read from the spec's directory.
- The spec's limits exactly on and one past (LoRA rank, alpha, dropout; sft epochs, batch_size, lr) and
  the documented defaults; `with_adapters`' refusal naming the model's linear layers; `BaseWeights`;
  `lora_checkpoint`'s three forms; `merged_model`'s merge, reuse and damaged checkpoint;
  `enable_gradient_checkpointing`'s two transformers spellings and its train-mode-only effect;
  `beyondagent sft` on a non-torch backend; `sft_only` reset on an error.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import attrs
import pytest
import torch
from beyondagent_plugin_torch import trainer as trainer_module
from beyondagent_plugin_torch.lora import BaseWeights, is_adapter_dir, merged_model, trainable_parameters, with_adapters
from beyondagent_plugin_torch.models import enable_gradient_checkpointing
from beyondagent_plugin_torch.seeds import episode_seed
from beyondagent_plugin_torch.sft import (
    SftExample,
    check_sft,
    conversation_sequence,
    data_file,
    is_sft_only,
    sft_only,
    sft_update,
)
from beyondagent_plugin_torch.trainer import Trainer, lora_checkpoint
from test_torch_keys_reach import trainers
from tiny_and_real import ENDOFTEXT_ID, loaded_policy

from beyondagent_core.checks import MAX_BATCH, MAX_COEF, MAX_EPOCHS, MAX_LR
from beyondagent_core.errors import RunError, SpecError
from beyondagent_core.runtime.tokens import ChatTemplate, TokenSequence
from beyondagent_core.spec import MAX_LORA_RANK, LoraSection, ModelSection, SftWarmup, structured

CPU = torch.device("cpu")
CONVERSATION = [{"role": "user", "content": "Which way?"}, {"role": "assistant", "content": "left"},
                {"role": "user", "content": "Again: which way?"}, {"role": "assistant", "content": "up down"}]
# Each differs from its default (rank 8, alpha 16, all-linear, dropout 0; sft epochs 1, batch 8, lr backend.lr;
# micro_batch_size 16, grad_clip 1.0, weight_decay 0.01, kl_coef 0) and from the quickstart's own.
KEYS = ("model.lora.rank=3", "model.lora.alpha=5", "model.lora.target_modules=[q_proj,v_proj]",
        "model.lora.dropout=0.25", "model.gradient_checkpointing=true", "algorithm.kl_coef=0.01",
        "algorithm.sft.lr=0.02", "algorithm.sft.batch_size=3", "algorithm.sft.epochs=2",
        "backend.micro_batch_size=1", "backend.grad_clip=0.5", "backend.lr=0.004", "backend.weight_decay=0.125",
        "run.seed=7")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("lora-sft")
    data = root / "sft.jsonl"
    data.write_text("".join(json.dumps({"messages": CONVERSATION[:2 + 2 * (i % 2)]}) + "\n" for i in range(4)))
    with trainers(root) as build:
        yield build("keyed", *KEYS, f"algorithm.sft.data={data}")


def adapted_layers(model: Any) -> set[str]:
    return {name.rsplit(".", 1)[-1] for name, module in model.named_modules() if hasattr(module, "lora_A")}


# --- model.lora.* and model.gradient_checkpointing on the trainer ----------------------------------


def test_every_lora_key_reaches_the_trainers_adapters(built: Any) -> None:
    config = built.model.peft_config["default"]
    assert (config.r, config.lora_alpha, config.lora_dropout) == (3, 5.0, 0.25)
    assert adapted_layers(built.model) == {"q_proj", "v_proj"}  # the named modules, not all-linear
    layer = next(module for module in built.model.modules() if hasattr(module, "lora_A"))
    assert layer.scaling["default"] == pytest.approx(5 / 3) and layer.lora_dropout["default"].p == 0.25
    assert layer.lora_A["default"].weight.shape[0] == 3


def test_the_optimizer_holds_the_adapters_only_and_the_reference_is_the_same_weights(built: Any) -> None:
    trained = {id(p) for group in built.optimizer.param_groups for p in group["params"]}
    named = {id(p): name for name, p in built.model.named_parameters()}
    assert trained and all("lora_" in named[i] for i in trained)
    assert len(trained) == sum(1 for p in built.model.parameters() if p.requires_grad)
    assert trainable_parameters(built.model)[0] == sum(p.numel() for p in built.model.parameters() if id(p) in trained)
    assert isinstance(built.ref_model, BaseWeights) and built.ref_model.model is built.model  # no second copy


def test_gradient_checkpointing_reaches_the_adapted_policy(built: Any) -> None:
    base = built.model.get_base_model()
    name = "is_activation_checkpointing" if hasattr(type(base), "is_activation_checkpointing") \
        else "is_gradient_checkpointing"
    assert getattr(base, name) is True


# --- algorithm.sft.* on the trainer's warm-up --------------------------------------------------------


def test_every_sft_key_reaches_the_warm_up(built: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[dict[str, Any]] = []

    def spy(model, optimizer, examples, **kwargs):
        seen.append({"optimizer": optimizer, "examples": list(examples), **kwargs})
        return sft_update(model, optimizer, examples, **kwargs)

    monkeypatch.setattr(trainer_module, "sft_update", spy)
    metrics = built.warm_up()
    (call,) = seen
    group = call["optimizer"].param_groups[0]
    assert (group["lr"], group["weight_decay"]) == (0.02, 0.125)
    assert {id(p) for p in group["params"]} == {id(p) for p in trainer_module.trained_parameters(built.model)}
    assert call["optimizer"] is not built.optimizer and not built.optimizer.state  # RL's AdamW starts fresh
    assert (call["epochs"], call["batch_size"], call["micro_batch_size"], call["grad_clip"]) == (2, 3, 1, 0.5)
    assert call["pad_token_id"] == built.tokenizer.pad_token_id
    assert call["generator"].initial_seed() == episode_seed(7, "sft", 0)
    # 4 examples in batches of 3: 2 steps an epoch, 2 epochs
    assert (metrics["sft/examples"], metrics["sft/steps"], metrics["sft/epochs"]) == (4.0, 4.0, 2.0)
    assert len(call["examples"]) == 4
    # sft.lr unset: the backend's lr
    built.algorithm = attrs.evolve(built.algorithm, sft=attrs.evolve(built.algorithm.sft, lr=None))
    built.warm_up()
    assert seen[1]["optimizer"].param_groups[0]["lr"] == 0.004


# --- eos vs end-of-turn, and where a relative data file is read from ------------------------------


def stub_trainer(name: str, spec_path: Path) -> Trainer:
    model, tokenizer = loaded_policy(name)
    trainer = object.__new__(Trainer)
    trainer.model, trainer.tokenizer, trainer.template = model, tokenizer, ChatTemplate(tokenizer)
    trainer.run = SimpleNamespace(spec=SimpleNamespace(path=spec_path), info=SimpleNamespace(seed=0))
    return trainer


def test_a_file_example_is_the_templates_rendering_ending_each_turn_on_end_of_turn_not_eos(tmp_path: Path,
                                                                                          monkeypatch) -> None:
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "moves.jsonl").write_text(json.dumps({"messages": CONVERSATION}) + "\n")
    monkeypatch.chdir(tmp_path)  # the relative name is not a file here: only the spec's directory has it
    trainer = stub_trainer("tiny_eos", tmp_path / "specs" / "spec.yaml")
    im_end = trainer.tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert trainer.tokenizer.eos_token_id == ENDOFTEXT_ID != im_end
    (example,), counts = trainer.sft_examples(SimpleNamespace(data="moves.jsonl"))
    assert counts == {}
    ids, mask = example.sequence.input_ids, example.sequence.loss_mask
    rendered = list(trainer.tokenizer.apply_chat_template(CONVERSATION, tokenize=True, return_dict=True)["input_ids"])
    assert rendered[:len(ids)] == ids and rendered[len(ids):] == trainer.template.turn_suffix_ids[1:]
    for start, stop in example.sequence.turn_spans:
        assert ids[stop - 1] == im_end and mask[start:stop] == [1] * (stop - start)
    assert ENDOFTEXT_ID not in ids
    assert sum(mask) == len(trainer.template.encode("left")) + len(trainer.template.encode("up down")) + 2


def test_data_file_reads_a_relative_name_from_the_specs_directory_else_as_given(tmp_path: Path) -> None:
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "here.jsonl").write_text("{}\n")
    spec = tmp_path / "specs" / "spec.yaml"
    assert data_file("here.jsonl", spec) == tmp_path / "specs" / "here.jsonl"
    assert data_file("elsewhere.jsonl", spec) == Path("elsewhere.jsonl")  # not in the spec's directory
    assert data_file("here.jsonl", None) == Path("here.jsonl")
    assert data_file(str(tmp_path / "abs.jsonl"), spec) == tmp_path / "abs.jsonl"
    assert data_file("~/x.jsonl", None) == Path.home() / "x.jsonl"
    check_sft(SftWarmup(data="here.jsonl"), spec, "spec.yaml")  # found beside the spec: no error
    for source in ("successful", "synthetic_references"):
        check_sft(SftWarmup(data=source), None, "spec.yaml")
    check_sft(None, None, "spec.yaml")
    with pytest.raises(SpecError, match="'elsewhere.jsonl': neither successful nor synthetic_references"):
        check_sft(SftWarmup(data="elsewhere.jsonl"), spec, "spec.yaml")


# --- the SFT loss, by hand --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_examples() -> tuple[Any, Any, list[SftExample]]:
    model, tokenizer = loaded_policy("tiny")
    template = ChatTemplate(tokenizer)
    conversations = [CONVERSATION, [{"role": "user", "content": "Go."},
                                    {"role": "assistant", "content": "left up down right left"}]]
    examples = [SftExample(conversation_sequence(c, template, 2, where="x"), "x") for c in conversations]
    counts = [sum(e.sequence.loss_mask) for e in examples]
    assert counts[0] != counts[1]  # a mean per example would weigh them otherwise
    return model, tokenizer, examples


def hand_loss(model: Any, examples: list[SftExample]) -> torch.Tensor:
    """The mean NLL of the batch's mask-1 tokens, from the raw logits of each sequence on its own."""
    total, count = torch.zeros(()), 0
    for example in examples:
        ids = torch.tensor([example.sequence.input_ids])
        logits = model(input_ids=ids).logits[0, :-1].float()
        nll = -torch.log_softmax(logits, -1).gather(1, ids[0, 1:, None])[:, 0]
        mask = torch.tensor(example.sequence.loss_mask[1:], dtype=torch.float32)
        total = total + (nll * mask).sum()
        count += int(mask.sum())
    return total / count


def test_one_warm_up_step_is_the_gradient_of_the_batchs_token_mean_nll(tiny_examples) -> None:
    model, tokenizer, examples = tiny_examples
    reference = copy.deepcopy(model).float()
    loss = hand_loss(reference, examples)
    loss.backward()
    expected = {name: p.detach() - 0.5 * p.grad for name, p in reference.named_parameters()}
    for micro in (1, 2):
        policy = copy.deepcopy(model)
        metrics = sft_update(policy, torch.optim.SGD(policy.parameters(), lr=0.5), examples, epochs=1, batch_size=2,
                             micro_batch_size=micro, grad_clip=1e9, pad_token_id=tokenizer.pad_token_id, device=CPU,
                             generator=torch.Generator().manual_seed(0))
        assert metrics["sft/loss"] == pytest.approx(float(loss), rel=1e-5)
        assert metrics["sft/tokens"] == sum(sum(e.sequence.loss_mask) for e in examples)
        assert metrics["sft/steps"] == 1.0 and not policy.training  # left in eval mode
        for name, weights in policy.named_parameters():
            assert torch.allclose(weights, expected[name], atol=2e-6), (micro, name)


def test_the_clip_norm_bounds_the_warm_up_step(tiny_examples) -> None:
    model, tokenizer, examples = tiny_examples
    policy = copy.deepcopy(model)
    sft_update(policy, torch.optim.SGD(policy.parameters(), lr=1.0), examples, epochs=1, batch_size=2,
               micro_batch_size=2, grad_clip=1e-3, pad_token_id=tokenizer.pad_token_id, device=CPU,
               generator=torch.Generator().manual_seed(0))
    start = dict(model.named_parameters())
    moved = torch.sqrt(sum(((p.detach() - start[n]) ** 2).sum() for n, p in policy.named_parameters()))
    assert float(moved) == pytest.approx(1e-3, rel=1e-3)


def test_a_batch_with_no_trained_token_takes_no_step(tiny_examples) -> None:
    model, tokenizer, examples = tiny_examples
    context_only = TokenSequence(ChatTemplate(tokenizer))
    context_only.add_context(list(examples[0].sequence.input_ids[:6]))
    policy = copy.deepcopy(model)
    metrics = sft_update(policy, torch.optim.SGD(policy.parameters(), lr=0.5),
                         [SftExample(context_only, "x"), examples[1]], epochs=1, batch_size=1, micro_batch_size=1,
                         grad_clip=1e9, pad_token_id=tokenizer.pad_token_id, device=CPU,
                         generator=torch.Generator().manual_seed(0))
    assert metrics["sft/steps"] == 1.0 and metrics["sft/tokens"] == sum(examples[1].sequence.loss_mask)
    assert all(torch.isfinite(p).all() for p in policy.parameters())


def test_a_non_finite_gradient_takes_no_step_and_the_training_forward_is_in_train_mode(tiny_examples) -> None:
    model, tokenizer, examples = tiny_examples
    policy = copy.deepcopy(model)
    head = policy.get_output_embeddings().weight
    head.register_hook(lambda grad: grad * float("inf"))
    modes: list[bool] = []
    policy.register_forward_pre_hook(lambda module, args: modes.append(module.training))
    before = {name: p.detach().clone() for name, p in policy.named_parameters()}
    metrics = sft_update(policy, torch.optim.SGD(policy.parameters(), lr=0.5), examples, epochs=1, batch_size=2,
                         micro_batch_size=2, grad_clip=1.0, pad_token_id=tokenizer.pad_token_id, device=CPU,
                         generator=torch.Generator().manual_seed(0))
    assert metrics["sft/steps"] == 1.0 and modes == [True] and not policy.training
    assert all(torch.equal(p.detach(), before[name]) for name, p in policy.named_parameters())


# --- the spec's limits and defaults -----------------------------------------------------------------


def lora(**block: Any) -> LoraSection:
    return structured(ModelSection, {"lora": block}, "model", "s.yaml").lora


@pytest.mark.parametrize(("block", "accepted"), [
    ({"rank": 1}, True), ({"rank": 0}, False), ({"rank": MAX_LORA_RANK}, True), ({"rank": MAX_LORA_RANK + 1}, False),
    ({"alpha": 1e-9}, True), ({"alpha": 0.0}, False), ({"alpha": float(MAX_COEF * MAX_LORA_RANK)}, True),
    ({"alpha": MAX_COEF * MAX_LORA_RANK * (1 + 1e-9)}, False),
    ({"dropout": 0.0}, True), ({"dropout": -1e-9}, False), ({"dropout": 0.999}, True), ({"dropout": 1.0}, False),
], ids=lambda value: str(value))
def test_lora_limits_exactly_on_and_one_past(block: dict[str, Any], accepted: bool) -> None:
    (key, value), = block.items()
    if accepted:
        assert getattr(lora(**block), key) == value
    else:
        with pytest.raises(SpecError) as refused:
            lora(**block)
        assert f"model.lora.{key}" in str(refused.value)


@pytest.mark.parametrize(("block", "accepted"), [
    ({"epochs": 1}, True), ({"epochs": 0}, False), ({"epochs": MAX_EPOCHS}, True), ({"epochs": MAX_EPOCHS + 1}, False),
    ({"batch_size": 1}, True), ({"batch_size": MAX_BATCH}, True), ({"batch_size": MAX_BATCH + 1}, False),
    ({"lr": 1e-12}, True), ({"lr": 0.0}, False), ({"lr": MAX_LR}, True), ({"lr": MAX_LR * (1 + 1e-9)}, False),
    ({"data": " "}, False),
], ids=lambda value: str(value))
def test_sft_limits_exactly_on_and_one_past(block: dict[str, Any], accepted: bool) -> None:
    from beyondagent_core.spec import AlgorithmSection

    def build() -> Any:
        return structured(AlgorithmSection, {"sft": {"data": "successful", **block}}, "algorithm", "s.yaml").sft

    (key, value), = block.items()
    if accepted:
        assert getattr(build(), key) == value
    else:
        with pytest.raises(SpecError) as refused:
            build()
        assert f"algorithm.sft.{key}" in str(refused.value)


def test_the_documented_defaults_of_lora_sft_and_checkpointing() -> None:
    assert attrs.asdict(LoraSection()) == {"rank": 8, "alpha": 16.0, "target_modules": ["all-linear"], "dropout": 0.0}
    assert (SftWarmup(data="x").epochs, SftWarmup(data="x").lr, SftWarmup(data="x").batch_size) == (1, None, 8)
    assert ModelSection().gradient_checkpointing is None and ModelSection().lora is None


# --- with_adapters, BaseWeights, lora_checkpoint, merged_model ------------------------------------------


def test_all_linear_adapts_every_linear_layer_but_the_output_head() -> None:
    model, _ = loaded_policy("tiny")
    wrapped = with_adapters(copy.deepcopy(model), LoraSection(), seed=0)
    linear = {name.rsplit(".", 1)[-1] for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    assert adapted_layers(wrapped) == linear - {"lm_head"} and "lm_head" in linear


def test_an_unknown_target_module_is_a_spec_error_naming_the_models_linear_layers() -> None:
    model, _ = loaded_policy("tiny")
    with pytest.raises(SpecError) as refused:
        with_adapters(copy.deepcopy(model), LoraSection(target_modules=["no_such_proj"]), seed=0)
    assert refused.value.where == "model.lora.target_modules"
    assert "q_proj" in refused.value.hint and "all-linear" in refused.value.hint
    with pytest.raises(SpecError) as refused:
        with_adapters(copy.deepcopy(model), LoraSection(target_modules=["nope"]), seed=0, where="s.yaml, key model.lora")
    assert refused.value.where == "s.yaml, key model.lora.target_modules"


def test_base_weights_run_the_policy_with_its_adapters_off() -> None:
    model, _ = loaded_policy("tiny")
    wrapped = with_adapters(copy.deepcopy(model), LoraSection(rank=2, alpha=4.0), seed=0)
    with torch.no_grad():
        for name, p in wrapped.named_parameters():
            if "lora_B" in name:
                p.fill_(0.05)
    ids = torch.tensor([[1, 554, 201, 57, 783]])
    base = BaseWeights(wrapped)
    with torch.no_grad():
        assert torch.allclose(base(input_ids=ids).logits, model(input_ids=ids).logits, atol=1e-6)
        assert not torch.allclose(wrapped(input_ids=ids).logits, model(input_ids=ids).logits, atol=1e-3)
    assert base.config is wrapped.config  # everything else is the policy's own


def write_checkpoint(run_dir: Path, step: int, *, lora: bool) -> Path:
    path = run_dir / "checkpoints" / f"step_{step:06d}"
    (path / "model").mkdir(parents=True)
    (path / "state.json").write_text(json.dumps({"step": step, "spec": {"model": {"path": "tiny"}}}))
    (path / "optimizer.pt").write_bytes(b"")
    if lora:
        (path / "model" / "adapter_config.json").write_text("{}")
    return path


def test_lora_checkpoint_names_a_step_its_model_or_a_runs_newest(tmp_path: Path) -> None:
    first, newest = write_checkpoint(tmp_path / "run", 1, lora=True), write_checkpoint(tmp_path / "run", 2, lora=True)
    assert lora_checkpoint(first) == first and lora_checkpoint(first / "model") == first
    assert lora_checkpoint(tmp_path / "run") == newest
    full = write_checkpoint(tmp_path / "full", 1, lora=False)
    assert lora_checkpoint(full) is None and lora_checkpoint(tmp_path / "full") is None
    (tmp_path / "empty" / "checkpoints").mkdir(parents=True)
    assert lora_checkpoint(tmp_path / "empty") is None and lora_checkpoint(tmp_path / "nothing") is None
    assert is_adapter_dir(first / "model") and not is_adapter_dir(full / "model")


def test_merged_model_merges_once_and_refuses_a_checkpoint_without_its_base(tmp_path: Path) -> None:
    model, _ = loaded_policy("tiny")
    wrapped = with_adapters(copy.deepcopy(model), LoraSection(rank=2, alpha=6.0, target_modules=["q_proj"]), seed=0)
    with torch.no_grad():
        for name, p in wrapped.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.2, generator=torch.Generator().manual_seed(1))
    step = tmp_path / "step_000001"
    wrapped.save_pretrained(step / "model")
    loaded_policy("tiny")[1].save_pretrained(step / "model")
    (step / "state.json").write_text(json.dumps({"step": 1, "spec": {"model": {"path": "tiny"}}}))
    said: list[str] = []
    merged = merged_model(step, say=said.append)
    assert merged == step / "merged" and len(said) == 1 and "merging the LoRA adapters" in said[0]
    assert not (step / ".merged-staging").exists()
    from beyondagent_plugin_torch.models import load_policy

    merged_policy, _ = load_policy(str(merged), dtype="float32")
    ids = torch.tensor([[1, 554, 201, 57, 783]])
    with torch.no_grad():
        assert torch.allclose(merged_policy(input_ids=ids).logits, wrapped(input_ids=ids).logits, atol=1e-5)
        assert not torch.allclose(merged_policy(input_ids=ids).logits, model(input_ids=ids).logits, atol=1e-3)
    (step / "state.json").write_text("damaged")  # merged already: reused without reading it
    assert merged_model(step, say=said.append) == merged and len(said) == 1
    broken = tmp_path / "step_000002"
    broken.mkdir()
    for state in (None, "{not json", json.dumps({"spec": {"model": {}}}), json.dumps({"spec": None})):
        if state is not None:
            (broken / "state.json").write_text(state)
        with pytest.raises(RunError, match="does not name its base model") as refused:
            merged_model(broken)
        assert refused.value.where == str(broken / "state.json")


# --- gradient checkpointing ----------------------------------------------------------------------------


class Recording:
    supports_gradient_checkpointing = True

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def gradient_checkpointing_enable(self, **kwargs: Any) -> None:
        self.calls.append(("gradient_checkpointing_enable", kwargs))


class RecordingV5(Recording):
    def activation_checkpointing_enable(self, **kwargs: Any) -> None:
        self.calls.append(("activation_checkpointing_enable", kwargs))


def test_checkpointing_is_switched_on_non_reentrant_under_either_transformers_name() -> None:
    for model, name, key in ((Recording(), "gradient_checkpointing_enable", "gradient_checkpointing_kwargs"),
                             (RecordingV5(), "activation_checkpointing_enable", "activation_checkpointing_kwargs")):
        enable_gradient_checkpointing(model)
        assert model.calls == [(name, {key: {"use_reentrant": False}})]
    with pytest.raises(SpecError) as refused:  # no such attribute at all: not supported either
        enable_gradient_checkpointing(object())
    assert refused.value.where == "model.gradient_checkpointing"


def test_checkpointing_recomputes_in_train_mode_only() -> None:
    """Rollouts run in eval mode: their forward passes keep every activation (and their KV cache)."""
    model, _ = loaded_policy("tiny")
    policy = copy.deepcopy(model)
    enable_gradient_checkpointing(policy)
    mlp = next(m for name, m in policy.named_modules() if name.endswith("layers.0.mlp"))
    calls: list[int] = []
    mlp.register_forward_pre_hook(lambda *args: calls.append(1))
    ids = torch.tensor([[1, 554, 201, 57, 783]])
    counts = {}
    for mode in ("eval", "train"):
        calls.clear()
        getattr(policy, mode)()(input_ids=ids).logits.sum().backward()
        counts[mode] = len(calls)
    assert counts == {"eval": 1, "train": 2}


# --- beyondagent sft ------------------------------------------------------------------------------------


def test_the_sft_command_refuses_a_backend_other_than_torch(tmp_path: Path, capsys, monkeypatch) -> None:
    from beyondagent_core.cli import main

    monkeypatch.delenv("BEYONDAGENT_DISABLE_PLUGIN_AUTOLOAD", raising=False)  # the CLI loads its plugins
    monkeypatch.setenv("BEYONDAGENT_PLUGINS", "gym,mixers,torch,trinity")

    trinity = Path(__file__).resolve().parents[3] / "examples" / "trinity_frozenlake.yaml"
    assert main(["sft", str(trinity), f"run.output_dir={tmp_path}", "algorithm.sft.data=successful"]) == 2
    err = capsys.readouterr().err
    assert "beyondagent sft runs on the torch backend, not 'trinity'" in err and "backend.name=torch" in err
    assert not any(tmp_path.rglob("metrics.jsonl"))  # refused before anything ran


def test_sft_only_is_reset_when_the_warm_up_fails() -> None:
    assert not is_sft_only()
    with pytest.raises(RuntimeError), sft_only():
        assert is_sft_only()
        raise RuntimeError("boom")
    assert not is_sft_only()
