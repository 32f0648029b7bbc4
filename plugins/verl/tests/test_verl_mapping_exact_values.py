"""The values verl gets, not only which keys move (mapping.py, main venv, no verl import).

`test_verl_every_key.py` checks that each spec key moves exactly its own verl keys; a key mapped
to a wrong value (`max_staleness + 2`, a clip bound read from the other side, `kl_coef * 2`,
`warmup_steps` kept at 0 where verl wants -1) still moves the right keys. Here:

- every case of that table (`MOVES`, the same value and context) gives each verl key it moves an
  exact value (`VALUES`, kept to the same keys);
- the derived fields at the values where they turn (0 meaning verl's "never", a clip bound left
  unset, no KL, no validation files, the logger given as a string);
- `check()`'s divisibility and size limits exactly at the limit (accepted) and one past (refused,
  naming our key), and native `backend.verl` keys that name what we would set anyway (accepted).

To stay fast the example spec is prepared once and each case is a copy with its settings (the
config classes' own validators still run); the few cases that need a component of their own (a
critic, an experience store, an estimator of ours) prepare their spec once per module.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest
from beyondagent_plugin_verl.mapping import OFF_POLICY_LOSS, OUR_TRAINER, RunFiles, verl_overrides
from test_verl_every_key import ACTOR, EXAMPLE, MOVES, MODEL, ROLLOUT, V1

from beyondagent_core.errors import SpecError
from beyondagent_core.plugins import PluginManager, Switches
from beyondagent_core.spec import LoraSection, Spec
from beyondagent_core.testing.key_reach import prepared

REF = "actor_rollout_ref.ref"
CORRECTION = "algorithm.rollout_correction"
TRAIN_FILES = ("t.parquet",)


@pytest.fixture(scope="module")
def manager() -> PluginManager:
    return PluginManager(Switches(autoload=True)).load()


@pytest.fixture(scope="module")
def base(manager: PluginManager, tmp_path_factory: pytest.TempPathFactory) -> Spec:
    return prepared(EXAMPLE, {}, tmp_path_factory.mktemp("base"), manager)


def variant(spec: Spec, settings: dict[str, Any]) -> Spec:
    """`spec` with each dotted `backend.` / `algorithm.` / `model.` / `model.lora.` / `run.` setting."""
    sections: dict[str, dict[str, Any]] = {}
    for dotted, value in settings.items():
        head, _, rest = dotted.partition(".")
        if dotted.startswith("model.lora."):
            head, rest = "lora", dotted.removeprefix("model.lora.")
        sections.setdefault(head, {})[rest] = value
    model = spec.model
    if "lora" in sections:
        model = attrs.evolve(model, lora=attrs.evolve(model.lora or LoraSection(), **sections.pop("lora")))
    model = attrs.evolve(model, **sections.pop("model", {}))
    backend = spec.component("backend")
    components = {**spec.components,
                  "backend": attrs.evolve(backend, config=attrs.evolve(backend.config, **sections.pop("backend", {})))}
    out = attrs.evolve(spec, model=model, components=components,
                       algorithm=attrs.evolve(spec.algorithm, **sections.pop("algorithm", {})),
                       run=attrs.evolve(spec.run, **sections.pop("run", {})))
    assert not sections, f"no such section here: {sorted(sections)}"
    return out


def keys(spec: Spec, tmp_path: Path, *, val_files: tuple[str, ...] = ("v.parquet",)) -> dict[str, Any]:
    """verl key -> value (the last one set wins, as in compose)."""
    files = RunFiles(run_dir=tmp_path / "run", train_files=TRAIN_FILES, val_files=val_files,
                     agent_loop_config=tmp_path / "run" / "verl" / "agent_loop.yaml")
    return {o.key: o.value for o in verl_overrides(spec, spec.component("backend").config, files,
                                                   model_path="/models/m")}


MIXED_FP32 = {"param_dtype": "fp32", "reduce_dtype": "fp32", "buffer_dtype": "fp32"}

# spec key -> the exact value of each verl key its `MOVES` case moves
VALUES: dict[str, dict[str, Any]] = {
    "backend.total_steps": {"trainer.total_training_steps": 40},
    "backend.batch_size": {"data.train_batch_size": 8, f"{ACTOR}.ppo_mini_batch_size": 8},
    "backend.lr": {f"{ACTOR}.optim.lr": 0.001},
    "backend.warmup_steps": {f"{ACTOR}.optim.lr_warmup_steps": 5},
    "backend.weight_decay": {f"{ACTOR}.optim.weight_decay": 0.05},
    "backend.grad_clip": {f"{ACTOR}.grad_clip": 0.5},
    "backend.ppo_epochs": {f"{ACTOR}.ppo_epochs": 2},
    "backend.mini_batch_size": {f"{ACTOR}.ppo_mini_batch_size": 2},
    "backend.micro_batch_size": {f"{ACTOR}.ppo_micro_batch_size_per_gpu": 4,
                                 f"{ROLLOUT}.log_prob_micro_batch_size_per_gpu": 4,
                                 f"{REF}.log_prob_micro_batch_size_per_gpu": 4},
    "backend.temperature": {f"{ROLLOUT}.temperature": 0.7},
    "backend.top_p": {f"{ROLLOUT}.top_p": 0.9},
    "backend.max_prompt_tokens": {"data.max_prompt_length": 128},
    "backend.max_response_tokens": {"data.max_response_length": 128},
    "backend.val_temperature": {f"{ROLLOUT}.val_kwargs.temperature": 0.0, f"{ROLLOUT}.val_kwargs.do_sample": False},
    "backend.rollout_mode": {f"{V1}.trainer_mode": "colocate_async", f"{V1}.colocate_async.num_warmup_batches": 1,
                             f"{V1}.sampler.max_off_policy_threshold": 2,
                             f"{V1}.sampler.max_off_policy_strategy": "drop",
                             f"{CORRECTION}.rollout_is": "token", f"{CORRECTION}.rollout_is_threshold": 2.0},
    # verl counts the version a prompt started in: 3 versions behind span 4
    "backend.max_staleness": {f"{V1}.colocate_async.num_warmup_batches": 3,
                              f"{V1}.sampler.max_off_policy_threshold": 4},
    "backend.tis_cap": {f"{CORRECTION}.rollout_is_threshold": 3.0},
    "backend.nodes": {"trainer.nnodes": 2},
    "backend.gpus_per_node": {"trainer.n_gpus_per_node": 4},
    "backend.tensor_parallel": {f"{ROLLOUT}.tensor_model_parallel_size": 2},
    "backend.gpu_memory_utilization": {f"{ROLLOUT}.gpu_memory_utilization": 0.5},
    "backend.eval_every": {"trainer.test_freq": 10},
    "backend.save_every": {"trainer.save_freq": 10},
    "backend.keep_checkpoints": {"trainer.max_actor_ckpt_to_keep": 3},
    "backend.project": {"trainer.project_name": "other"},
    "algorithm.group_size": {f"{ROLLOUT}.n": 4},
    "algorithm.norm_adv_by_std": {"algorithm.norm_adv_by_std_in_grpo": False},
    "algorithm.clip_ratio": {f"{ACTOR}.clip_ratio": 0.3, f"{ACTOR}.clip_ratio_low": 0.3,
                             f"{ACTOR}.clip_ratio_high": 0.3},
    "algorithm.clip_ratio_low": {f"{ACTOR}.clip_ratio_low": 0.1},
    "algorithm.clip_ratio_high": {f"{ACTOR}.clip_ratio_high": 0.28},
    "algorithm.clip_ratio_c": {f"{ACTOR}.clip_ratio_c": 5.0},
    "algorithm.kl_coef": {f"{ACTOR}.use_kl_loss": True, f"{ACTOR}.kl_loss_coef": 0.05},
    "algorithm.kl_type": {f"{ACTOR}.kl_loss_type": "kl"},
    "algorithm.loss_agg_mode": {f"{ACTOR}.loss_agg_mode": "seq-mean-token-mean"},
    "algorithm.entropy_coeff": {f"{ACTOR}.entropy_coeff": 0.02},
    "algorithm.policy_loss": {f"{ACTOR}.policy_loss.loss_mode": "gspo"},
    "model.tokenizer": {f"{MODEL}.tokenizer_path": "/tokenizers/other"},
    "model.dtype": {f"+{ACTOR}.fsdp_config.mixed_precision": MIXED_FP32,
                    f"+{REF}.fsdp_config.mixed_precision": MIXED_FP32,
                    f"{ROLLOUT}.dtype": "float32"},
    "model.param_dtype": {f"{ACTOR}.fsdp_config.model_dtype": "bf16", f"{REF}.fsdp_config.model_dtype": "bf16"},
    "model.lora.rank": {f"{MODEL}.lora_rank": 4},
    "model.lora.alpha": {f"{MODEL}.lora_alpha": 32},
    "model.lora.target_modules": {f"{MODEL}.target_modules": ["q_proj", "v_proj"]},
    "model.gradient_checkpointing": {f"{MODEL}.enable_gradient_checkpointing": True},
    "run.seed": {"data.seed": 3},
    "run.name": {"trainer.experiment_name": "other"},
}


def test_the_value_table_covers_the_key_reach_table_key_for_key() -> None:
    assert set(VALUES) == set(MOVES)
    for key, (_, _, moved) in MOVES.items():
        assert set(VALUES[key]) == moved, key


@pytest.mark.parametrize("spec_key", sorted(VALUES))
def test_each_spec_key_gives_its_verl_keys_their_exact_values(base: Spec, tmp_path: Path, spec_key: str) -> None:
    value, context, _ = MOVES[spec_key]
    got = keys(variant(base, {**context, spec_key: value}), tmp_path)
    assert {key: got.get(key) for key in VALUES[spec_key]} == VALUES[spec_key]


@pytest.mark.parametrize(("settings", "expected", "absent"), [
    # 0 is verl's "never" (-1): no warm-up, no checkpoints, no validation (and none before training)
    ({"backend.warmup_steps": 0}, {f"{ACTOR}.optim.lr_warmup_steps": -1}, ()),
    ({"backend.save_every": 0}, {"trainer.save_freq": -1}, ()),
    ({"backend.eval_every": 0}, {"trainer.test_freq": -1, "trainer.val_before_train": False}, ()),
    ({"backend.eval_every": 1}, {"trainer.test_freq": 1, "trainer.val_before_train": True}, ()),
    ({"backend.total_steps": None}, {"trainer.total_epochs": 1}, ("trainer.total_training_steps",)),
    # no mini-batch: the whole batch is one optimizer step
    ({"backend.batch_size": 2, "backend.mini_batch_size": None}, {f"{ACTOR}.ppo_mini_batch_size": 2}, ()),
    ({"algorithm.kl_coef": 0.0}, {f"{ACTOR}.use_kl_loss": False, f"{ACTOR}.kl_loss_coef": 0.0}, ()),
    # an unset clip bound is clip_ratio, never the other bound
    ({"algorithm.clip_ratio": 0.3, "algorithm.clip_ratio_high": 0.28},
     {f"{ACTOR}.clip_ratio_low": 0.3, f"{ACTOR}.clip_ratio_high": 0.28, f"{ACTOR}.clip_ratio": 0.3}, ()),
    ({"algorithm.clip_ratio": 0.3, "algorithm.clip_ratio_low": 0.1},
     {f"{ACTOR}.clip_ratio_low": 0.1, f"{ACTOR}.clip_ratio_high": 0.3}, ()),
    ({"algorithm.clip_ratio_low": 0.1, "algorithm.clip_ratio_high": 0.28},
     {f"{ACTOR}.clip_ratio_low": 0.1, f"{ACTOR}.clip_ratio_high": 0.28, f"{ACTOR}.clip_ratio": 0.2}, ()),
    # validation samples only when val_temperature says so, whatever the training temperature
    ({"backend.val_temperature": 0.3, "backend.temperature": 0.0},
     {f"{ROLLOUT}.val_kwargs.do_sample": True, f"{ROLLOUT}.temperature": 0.0}, ()),
    # LoRA on every linear layer: verl's own string, not a one-item list
    ({"model.lora.rank": 8}, {f"{MODEL}.target_modules": "all-linear", f"{MODEL}.lora_alpha": 16.0}, ()),
    ({}, {"data.val_files": ["v.parquet"], "data.train_files": list(TRAIN_FILES)}, (f"{MODEL}.lora_rank",)),
])
def test_derived_fields_where_they_turn(base: Spec, tmp_path: Path, settings: dict[str, Any],
                                        expected: dict[str, Any], absent: tuple[str, ...]) -> None:
    got = keys(variant(base, settings), tmp_path)
    assert {key: got.get(key, "<absent>") for key in expected} == expected
    assert not set(absent) & set(got)


def test_without_validation_files_verl_validates_on_the_training_files_and_not_before_training(
        base: Spec, tmp_path: Path) -> None:
    got = keys(base, tmp_path, val_files=())
    assert got["data.val_files"] == list(TRAIN_FILES)
    assert got["trainer.val_before_train"] is False and got["trainer.test_freq"] == 20  # eval_every: 20


@pytest.mark.parametrize(("logger", "expected"), [
    ("wandb", ["wandb", "file"]),  # a string is a one-logger list
    (["wandb"], ["wandb", "file"]),
    (["console", "file"], ["console", "file"]),  # the file logger once
    (["file", "tensorboard"], ["file", "tensorboard"]),
])
def test_a_native_logger_keeps_the_file_logger_our_metrics_read(base: Spec, tmp_path: Path, logger: Any,
                                                                expected: list[str]) -> None:
    got = keys(variant(base, {"backend.verl": {"trainer.logger": logger}}), tmp_path)
    assert got["trainer.logger"] == expected


@pytest.mark.parametrize("settings", [
    # batch x group exactly a multiple of the GPUs (the batch alone is not)
    {"backend.batch_size": 3, "algorithm.group_size": 2, "backend.gpus_per_node": 2},
    # a mini-batch's episodes exactly a multiple of the GPUs (the mini-batch alone is not)
    {"backend.batch_size": 4, "backend.mini_batch_size": 2, "algorithm.group_size": 2, "backend.gpus_per_node": 4},
    {"backend.batch_size": 4, "backend.mini_batch_size": 4},  # the whole batch as one mini-batch
    {"algorithm.group_size": 2},  # the smallest group GRPO can compare
    {"backend.gpus_per_node": 4, "backend.tensor_parallel": 4},  # one replica on all of a node's GPUs
    {"backend.nodes": 2, "backend.gpus_per_node": 2, "backend.batch_size": 1, "algorithm.group_size": 4},
    {"backend.rollout_mode": "one_step_off", "backend.max_staleness": 1},
    {"backend.rollout_mode": "async", "backend.verl": {"trainer.v1.trainer_mode": "colocate_async"}},
    {"backend.verl": {"data.shuffle": False}},
    {"backend.device": "cpu", "model.dtype": "float32", "model.param_dtype": "float32"},
    {"algorithm.loss_agg_mode": "seq-mean-token-sum-norm", "algorithm.kl_type": "full"},
])
def test_settings_exactly_at_a_limit_are_accepted(base: Spec, tmp_path: Path, settings: dict[str, Any]) -> None:
    keys(variant(base, settings), tmp_path)


@pytest.mark.parametrize(("settings", "key", "words"), [
    ({"backend.batch_size": 4, "backend.mini_batch_size": 1, "algorithm.group_size": 2, "backend.gpus_per_node": 4},
     "backend.mini_batch_size", "a mini-batch has 1 x 2 episodes, which 4 GPUs cannot share"),
    ({"backend.nodes": 2, "backend.gpus_per_node": 2, "backend.batch_size": 1, "algorithm.group_size": 2},
     "backend.batch_size", "1 x 2 = 2 episodes, which 4 GPUs"),
    ({"backend.device": "cpu", "backend.ray_address": "ray://head:10001"}, "backend.device", "does not join a cluster"),
    ({"algorithm.loss_agg_mode": "sum"}, "algorithm.loss_agg_mode", "unknown algorithm.loss_agg_mode 'sum'"),
    ({"backend.device": "cpu", "model.param_dtype": "float16"}, "model.param_dtype", "float32 only"),
    ({"backend.rollout_mode": "async", "backend.verl": {"trainer.v1.trainer_mode": OUR_TRAINER}},
     "backend.verl.trainer.v1.trainer_mode", "maps to trainer.v1.trainer_mode: colocate_async"),
])
def test_settings_one_past_a_limit_are_refused_naming_our_key(base: Spec, tmp_path: Path, settings: dict[str, Any],
                                                              key: str, words: str) -> None:
    with pytest.raises(SpecError) as caught:
        keys(variant(base, settings), tmp_path)
    assert caught.value.where.endswith(f"key {key}") and words in caught.value.message, caught.value


def test_our_own_trainer_mode_and_loss_named_by_hand_go_with_our_estimator_and_experience(
        manager: PluginManager, tmp_path: Path) -> None:
    spec = prepared(EXAMPLE, {"backend.advantage": {"name": "gigpo"}, "experience": {"name": "experience"}},
                    tmp_path, manager)
    native = {"trainer.v1.trainer_mode": OUR_TRAINER, "actor_rollout_ref.actor.policy_loss.loss_mode": OFF_POLICY_LOSS}
    got = keys(variant(spec, {"backend.verl": native}), tmp_path)
    assert got["trainer.v1.trainer_mode"] == OUR_TRAINER and got[f"{ACTOR}.policy_loss.loss_mode"] == OFF_POLICY_LOSS


def test_ppos_critic_gets_each_of_its_settings_and_a_group_of_one(manager: PluginManager, tmp_path: Path) -> None:
    spec = prepared(EXAMPLE, {"algorithm.group_size": 1, "model.tokenizer": "/tok",
                              "backend.advantage": {"name": "gae", "gamma": 0.95, "lam": 0.9},
                              "critic": {"path": "/critic/m", "lr": 3e-5, "warmup_steps": 2, "cliprange_value": 0.3}},
                    tmp_path, manager)
    got = keys(spec, tmp_path)
    assert {key: got[key] for key in (
        "algorithm.adv_estimator", "algorithm.gamma", "algorithm.lam", "critic.enable", "critic.model.path",
        "critic.model.tokenizer_path", "critic.optim.lr", "critic.cliprange_value", "trainer.critic_warmup",
        f"{ROLLOUT}.n")} == {
        "algorithm.adv_estimator": "gae", "algorithm.gamma": 0.95, "algorithm.lam": 0.9, "critic.enable": True,
        "critic.model.path": "/critic/m", "critic.model.tokenizer_path": "/tok", "critic.optim.lr": 3e-5,
        "critic.cliprange_value": 0.3, "trainer.critic_warmup": 2, f"{ROLLOUT}.n": 1}
    plain = keys(variant(spec, {"model.tokenizer": None}), tmp_path)
    assert plain["critic.model.tokenizer_path"] == "/models/m"  # no tokenizer of its own: the policy's path
