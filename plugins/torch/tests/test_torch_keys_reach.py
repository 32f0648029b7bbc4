"""Spec keys of the torch backend that reach their code: `attn_implementation`, `kv_layout`, `compile_decode`.

`backend.attn_implementation: eager` must load the policy with eager attention where the default
(`auto`, PyTorch's `sdpa` on a CPU) does not, in both places the backend loads it: the trainer
(`Trainer.__init__`, reached through a real run of examples/quickstart.yaml shrunk to the `tiny`
model; only `Trainer.fit` is replaced, to report the loaded model instead of training it) and the
policy served for `llm: policy` exploration (`TorchBackend.policy_llm`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from beyondagent_core import pipeline
from beyondagent_core.context import RunContext
from beyondagent_core.protocols import RunInfo
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
                           "backend.max_concurrency=4", "backend.max_episode_tokens=512").run_dir
    import json

    metrics = next(json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()
                   if '"rollout/kv_reused_tokens"' in line)
    from beyondagent_plugin_torch.slots import SlotScheduler

    scheduler = captured["scheduler"]
    assert isinstance(scheduler, SlotScheduler) and not scheduler._compile
    assert scheduler.capacity == 512 and len(scheduler.kv.slots) == 4
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
