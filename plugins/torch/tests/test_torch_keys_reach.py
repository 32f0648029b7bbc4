"""Spec keys of the torch backend that reach their code: `attn_implementation`, `kv_layout`, `compile_decode`.

`backend.attn_implementation: eager` must load the policy with eager attention where the default
(`auto`, PyTorch's `sdpa` on a CPU) does not, in both places the backend loads it: the trainer
(`Trainer.__init__`, reached through a real run of examples/quickstart.yaml shrunk to the `tiny`
model; only `Trainer.fit` is replaced, to report the loaded model instead of training it) and the
policy served for `llm: policy` exploration (`TorchBackend.policy_llm`).

The table at the end builds one real Trainer (the same shrunk quickstart through the real pipeline,
`fit` replaced to hand the Trainer back) with every other key it reads set to a value that cannot
act like its default (nor like the quickstart's own), and reads each one where it takes effect: the
optimizer and its warm-up, the sampling of the policy it serves, the rollout scheduler, the run's
length in steps, the precision of each model it holds, the checkpoint rotation, the failure
threshold and the samples kept per step. The backend's documented defaults are asserted too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import torch
from beyondagent_plugin_torch.checkpoint import checkpoints
from beyondagent_plugin_torch.config import OpponentPoolSettings, TorchConfig
from beyondagent_plugin_torch.generation import Sampling
from beyondagent_plugin_torch.metrics_log import MetricsLog, read_samples

from beyondagent_core import pipeline
from beyondagent_core.context import RunContext
from beyondagent_core.errors import RunError
from beyondagent_core.plugins import PluginManager, Switches
from beyondagent_core.protocols import RunInfo
from beyondagent_core.types import Reward
from beyondagent_plugin_torch import trainer as trainer_module

QUICKSTART = Path(__file__).resolve().parents[3] / "examples" / "quickstart.yaml"
SMALL = ("model.path=tiny", "tasks.train.count=2", "tasks.val.count=1", "algorithm.group_size=2",
         "backend.device=cpu", "backend.total_steps=1", "backend.batch_size=1", "backend.eval_every=0",
         "backend.save_every=0")


def attention_of(model: Any) -> str:
    return model.config._attn_implementation


def served_scheduler(plugin_manager: Any, tmp_path: Path, *overrides: str) -> Any:
    """The scheduler of the policy the backend serves for `llm: policy` exploration (`policy_llm`)."""
    session = pipeline.prepare(QUICKSTART, [*SMALL, f"run.output_dir={tmp_path}", *overrides], manager=plugin_manager)
    spec = session.spec
    info = RunInfo(name=spec.run.name, run_dir=tmp_path / spec.run.name, seed=spec.run.seed, spec={})
    context = RunContext(spec=spec, info=info, manager=plugin_manager)
    try:
        with spec.component("backend").create().policy_llm(context) as llm:
            return llm.scheduler
    finally:
        context.close()


@pytest.mark.beyondagent_plugins("gym", "mixers", "torch")
def test_attn_implementation_reaches_the_trainers_model(run_spec: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # Everything up to training is real (spec, tasks, runner, model load); `fit` reports what was loaded.
    monkeypatch.setattr(trainer_module.Trainer, "fit",
                        lambda self: {"kernel": self.attention, "loaded": attention_of(self.model)})
    default = run_spec(QUICKSTART, *SMALL, "run.name=auto").metrics
    eager = run_spec(QUICKSTART, *SMALL, "run.name=eager", "backend.attn_implementation=eager").metrics
    assert default == {"kernel": "sdpa", "loaded": "sdpa"}
    assert eager == {"kernel": "eager", "loaded": "eager"}


@pytest.mark.beyondagent_plugins("gym", "mixers", "torch")
def test_attn_implementation_reaches_the_policy_served_for_exploration(plugin_manager: Any, tmp_path: Path) -> None:
    def served_attention(*overrides: str) -> str:
        return attention_of(served_scheduler(plugin_manager, tmp_path, *overrides).model)

    assert served_attention() == "sdpa"
    assert served_attention("backend.attn_implementation=eager") == "eager"


@pytest.mark.beyondagent_plugins("gym", "mixers", "torch")
def test_kv_layout_slots_reaches_the_rollout_of_a_training_step(run_spec: Any) -> None:
    """One real step of the quickstart with `kv_layout: slots`: the trainer's scheduler holds one slot
    per concurrent episode, and the step's later turns reused what their slots held."""
    captured = {}
    original = trainer_module.make_scheduler

    def recording(*args: Any, **kwargs: Any) -> Any:
        captured["scheduler"] = original(*args, **kwargs)
        return captured["scheduler"]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(trainer_module, "make_scheduler", recording)
        run_dir = run_spec(QUICKSTART, *SMALL, "run.name=slots", "backend.kv_layout=slots",
                           "backend.max_concurrency=4", "backend.max_episode_tokens=384").run_dir
    import json

    metrics = next(json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()
                   if '"rollout/kv_reused_tokens"' in line)
    from beyondagent_plugin_torch.slots import SlotScheduler

    scheduler = captured["scheduler"]
    assert isinstance(scheduler, SlotScheduler) and not scheduler._compile
    assert scheduler.capacity == 384 and len(scheduler.kv.slots) == 4
    assert metrics["rollout/kv_reused_tokens"] > 0 and metrics["rollout/kv_evictions"] == 0


@pytest.mark.beyondagent_plugins("gym", "mixers", "torch")
def test_compile_decode_reaches_the_policy_served_for_exploration(plugin_manager: Any, tmp_path: Path) -> None:
    def served(*overrides: str) -> Any:
        return served_scheduler(plugin_manager, tmp_path, *overrides)

    from beyondagent_plugin_torch.generation import ChatScheduler
    from beyondagent_plugin_torch.slots import SlotScheduler

    assert type(served()) is ChatScheduler
    compiled = served("backend.kv_layout=slots", "backend.compile_decode=true")
    assert isinstance(compiled, SlotScheduler) and compiled._compile
    from beyondagent_plugin_torch.config import check_algorithm

    from beyondagent_core.errors import SpecError

    sessions = pipeline.prepare(QUICKSTART, [*SMALL, "backend.compile_decode=true"], manager=plugin_manager).spec
    with pytest.raises(SpecError, match="compile_decode compiles the decode step of kv_layout slots") as raised:
        check_algorithm(sessions, sessions.component("backend").create().config)
    assert raised.value.where.endswith("key backend.compile_decode")


# --- every other key of the backend block, on one real Trainer --------------------------------

# Each value differs from TorchConfig's default and from examples/quickstart.yaml's own.
NON_DEFAULT = ("backend.lr=0.003", "backend.weight_decay=0.25", "backend.warmup_steps=3", "backend.temperature=0.7",
               "backend.top_p=0.9", "backend.max_new_tokens=5", "backend.max_episode_tokens=300",
               "backend.max_concurrency=3", "backend.kv_cache_tokens=777", "backend.batching=continuous",
               "backend.batch_size=3", "backend.total_steps=null", "backend.epochs=2", "tasks.train.count=8",
               "backend.keep_checkpoints=1", "backend.max_failed_fraction=0.25", "backend.samples_per_step=3",
               "model.dtype=bfloat16", "algorithm.kl_coef=0.001")


@contextlib.contextmanager
def trainers(root: Path) -> Iterator[Callable[..., Any]]:
    """`build(name, *overrides, resume=False)`: the Trainer the real pipeline builds for the shrunk
    quickstart (its `fit` replaced, for that one build, by one that hands the Trainer back)."""
    with pytest.MonkeyPatch.context() as patch:
        for var in ("BEYONDAGENT_PLUGINS", "BEYONDAGENT_DISABLED_PLUGINS"):
            patch.delenv(var, raising=False)
        patch.setenv("BEYONDAGENT_DISABLE_PLUGIN_AUTOLOAD", "1")
        manager = PluginManager(Switches(autoload=False, allow={"gym", "mixers", "torch"})).load()
        built: dict[str, Any] = {}

        def build(name: str, *overrides: str, resume: bool = False) -> Any:
            session = pipeline.prepare(QUICKSTART, [*SMALL, f"run.output_dir={root}", f"run.name={name}", *overrides],
                                       manager=manager)
            with pytest.MonkeyPatch.context() as fit:
                fit.setattr(trainer_module.Trainer, "fit", lambda self: built.update({name: self}) or {})
                pipeline.run(session, resume=resume)
            return built[name]

        yield build


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with trainers(tmp_path_factory.mktemp("keys")) as build:
        yield build("keyed", *NON_DEFAULT)


def warmup_factors(trainer: Any) -> list[float]:
    return [trainer.lr_schedule.lr_lambdas[0](step) for step in range(5)]


def dtypes(model: Any) -> set[Any]:
    return {p.dtype for p in model.parameters()}


KEY_TABLE = [
    ("backend.lr", lambda t: t.optimizer.param_groups[0]["initial_lr"], 0.003),
    ("backend.weight_decay", lambda t: t.optimizer.param_groups[0]["weight_decay"], 0.25),
    # min(1, (step + 1) / (warmup + 1)): full lr from step 3 on, the step at warmup_steps
    ("backend.warmup_steps", warmup_factors, [0.25, 0.5, 0.75, 1.0, 1.0]),
    ("backend.warmup_steps (the lr at the first step)", lambda t: t.optimizer.param_groups[0]["lr"], 0.003 * 0.25),
    ("backend.temperature, top_p, max_new_tokens", lambda t: t.run.policy_llm.sampling, Sampling(0.7, 0.9, 5)),
    ("backend.max_episode_tokens", lambda t: t.run.policy_llm.max_episode_tokens, 300),
    ("backend.max_concurrency", lambda t: t.scheduler.max_batch_size, 3),
    ("backend.kv_cache_tokens", lambda t: t.scheduler.kv.budget_tokens, 777),
    ("backend.batching", lambda t: t.scheduler.batching, "continuous"),
    # 8 tasks in batches of 3: 3 steps an epoch (the last batch short), 2 epochs when total_steps is unset
    ("backend.batch_size", lambda t: t.steps_per_epoch, 3),
    ("backend.epochs", lambda t: t.total_steps, 6),
    ("run.seed", lambda t: t.run.policy_llm.seed, 0),
    # model.dtype bfloat16 over float32 weights: the policy and the KL reference compute in bf16 with
    # float32 weights; the rollout samples with a bf16 copy that computes in its own dtype
    ("model.dtype (the policy)", lambda t: (dtypes(t.model), t.model.autocast_dtype),
     ({torch.float32}, torch.bfloat16)),
    ("model.dtype (the KL reference)", lambda t: (dtypes(t.ref_model), t.ref_model.autocast_dtype),
     ({torch.float32}, torch.bfloat16)),
    ("model.dtype (the rollout copy)",
     lambda t: (dtypes(t.rollout_weights.model), t.scheduler.model is t.rollout_weights.model,
                "forward" in vars(t.rollout_weights.model)),
     ({torch.bfloat16}, True, False)),
]


@pytest.mark.parametrize(("key", "probe", "expected"), KEY_TABLE, ids=[row[0] for row in KEY_TABLE])
def test_each_backend_key_reaches_the_trainer_with_a_non_default_value(keyed: Any, key: str,
                                                                      probe: Callable[[Any], Any], expected: Any) -> None:
    got = probe(keyed)
    assert got == (pytest.approx(expected) if isinstance(expected, float | list) else expected), key


def test_the_rollout_copy_takes_each_optimizer_step_of_the_bf16_policy(keyed: Any) -> None:
    # the refresh hook the trainer registered: what the next rollout samples with after an update
    weight = next(p for p in keyed.model.parameters() if p.requires_grad)
    copy_of = dict(zip(map(id, keyed.model.parameters()), keyed.rollout_weights.model.parameters()))[id(weight)]
    with torch.no_grad():
        weight.add_(1.0)
    keyed.optimizer.step()  # no gradients: AdamW leaves the weights, the hook still copies them
    assert torch.equal(copy_of, weight.detach().to(torch.bfloat16))
    with torch.no_grad():
        weight.sub_(1.0)
    keyed.optimizer.step()


def test_keep_checkpoints_one_keeps_only_the_newest(keyed: Any) -> None:
    for step in (1, 2):
        keyed.save(step)
    assert [checkpoint.step for checkpoint in checkpoints(keyed.run.run_dir)] == [2]


def failed_episodes(failed: int, total: int) -> list[Any]:
    from beyondagent_plugin_torch.rollout import Episode

    from beyondagent_core.types import Reward, Task, Trajectory

    return [Episode(group=0, trajectory=Trajectory(task=Task(task_id=f"t{i}", env="frozenlake"),
                                                   reward=Reward(score=i / total, success=False),
                                                   error="env crashed" if i < failed else None),
                    sequence=None) for i in range(total)]


def test_max_failed_fraction_stops_the_step_just_past_it(keyed: Any) -> None:
    keyed.record_failures(7, failed_episodes(1, 4))  # 1 of 4 = 0.25: at the threshold, the step goes on
    lines = (keyed.run.run_dir / "episode_errors.jsonl").read_text().splitlines()
    assert len(lines) == 1 and '"step": 7' in lines[0]
    with pytest.raises(RunError) as caught:  # 2 of 4: past it
        keyed.record_failures(8, failed_episodes(2, 4))
    assert "step 8, episodes: 2 of 4 failed (50%, more than backend.max_failed_fraction = 0.25)" in str(caught.value)
    keyed.record_failures(9, failed_episodes(0, 4))  # none failed: nothing written
    assert len((keyed.run.run_dir / "episode_errors.jsonl").read_text().splitlines()) == 1 + 2


def test_samples_per_step_keeps_the_best_the_worst_then_the_first(keyed: Any, tmp_path: Path) -> None:
    episodes = failed_episodes(0, 5)
    for episode, score in zip(episodes, (0.5, 0.3, 0.7, 0.9, 0.1)):
        episode.trajectory.reward = Reward(score=score, success=False)
    with MetricsLog(tmp_path, tensorboard=False) as log:
        keyed.write_samples(log, 3, "train", episodes)
    kept = [line["trajectory"]["task"]["task_id"] for line in read_samples(tmp_path)]
    assert kept == ["t0", "t3", "t4"]  # the best (t3), the worst (t4), then the first (t0); in episode order


def test_the_documented_defaults_of_the_backend_block() -> None:
    config = TorchConfig()
    assert attrs.asdict(config) == {
        "device": "auto", "attn_implementation": "auto", "epochs": 1, "total_steps": None, "batch_size": 8,
        "lr": 1e-6, "warmup_steps": 0, "weight_decay": 0.01, "grad_clip": 1.0, "ppo_epochs": 1,
        "mini_batch_size": None, "micro_batch_size": 16, "temperature": 1.0, "top_p": 1.0, "max_new_tokens": 64,
        "max_episode_tokens": 1024, "max_concurrency": 64, "kv_cache_tokens": 65536, "batching": "lockstep",
        "kv_layout": "sessions", "compile_decode": False, "max_failed_fraction": 0.5, "rollout_mode": "sync",
        "max_staleness": 1, "tis_cap": 2.0, "rollout_is": None, "eval_every": 0, "val_temperature": 0.0,
        "save_every": 0, "keep_checkpoints": 2, "samples_per_step": 2, "tensorboard": None, "report": True,
        "opponent_pool": None}
    assert attrs.asdict(OpponentPoolSettings()) == {"size": 2, "refresh_every": 10, "games": 0.5}


@pytest.mark.beyondagent_plugins("gym", "mixers", "torch")
def test_the_served_policy_takes_the_same_keys_and_loads_in_the_compute_dtype(plugin_manager: Any,
                                                                              tmp_path: Path) -> None:
    """`TorchBackend.policy_llm` (exploration's `llm: policy`) builds its scheduler and sampling on its
    own: each key reaches it too; inference only, so the weights are loaded in the compute dtype."""
    session = pipeline.prepare(QUICKSTART, [*SMALL, f"run.output_dir={tmp_path}", *NON_DEFAULT], manager=plugin_manager)
    spec = session.spec
    info = RunInfo(name=spec.run.name, run_dir=tmp_path / spec.run.name, seed=5, spec={})
    context = RunContext(spec=spec, info=info, manager=plugin_manager)
    try:
        with spec.component("backend").create().policy_llm(context) as llm:
            scheduler = llm.scheduler
            assert (llm.sampling, llm.max_episode_tokens, llm.seed) == (Sampling(0.7, 0.9, 5), 300, 5)
            assert (scheduler.max_batch_size, scheduler.kv.budget_tokens, scheduler.batching) == (3, 777, "continuous")
            assert dtypes(scheduler.model) == {torch.bfloat16}
    finally:
        context.close()
