"""Spec keys of the torch backend that reach their code: `attn_implementation`.

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
        session = pipeline.prepare(QUICKSTART, [*SMALL, f"run.output_dir={tmp_path}", *overrides],
                                   manager=plugin_manager)
        spec = session.spec
        info = RunInfo(name=spec.run.name, run_dir=tmp_path / spec.run.name, seed=spec.run.seed, spec={})
        context = RunContext(spec=spec, info=info, manager=plugin_manager)
        try:
            with spec.component("backend").create().policy_llm(context) as llm:
                return attention_of(llm.scheduler.model)
        finally:
            context.close()

    assert served_attention() == "sdpa"
    assert served_attention("backend.attn_implementation=eager") == "eager"
