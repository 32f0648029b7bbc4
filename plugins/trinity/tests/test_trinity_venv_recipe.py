"""Trinity-RFT's venv recipe: the CPU torch pinned wherever pip could move it, and the fixes pip check misses."""

from __future__ import annotations

import pytest
from beyondagent_plugin_trinity import venv


def test_the_cpu_stack_pins_the_cpu_torch_and_the_three_fixes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(venv.STACK_VAR, "cpu")
    recipe = venv.recipe()
    steps = [list(step) for step in recipe.steps]
    assert steps[0] == [venv.TORCH_CPU]  # first, alone: the local CPU wheel
    assert venv.TORCH_CPU in steps[1] and f"trinity-rft=={venv.TRINITY_VERSION}" in steps[1]  # trinity cannot move it
    assert {"pyarrow==21.0.0", "fastapi", "greenlet", venv.VERL} <= set(steps[1])
    assert steps[-1] == [venv.OMEGACONF]
    assert recipe.local[:2] == venv.ALWAYS and not set(venv.EXCLUDED) & set(recipe.local)
    assert "from trinity.common.workflows import WORKFLOWS" in recipe.check


def test_the_gpu_stack_takes_trinitys_own_cuda_pins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(venv.STACK_VAR, "gpu")
    steps = [list(step) for step in venv.recipe().steps]
    assert steps[0][0] == f"trinity-rft[vllm]=={venv.TRINITY_VERSION}" and venv.TORCH_CPU not in steps[0]
    monkeypatch.setenv(venv.STACK_VAR, "tpu")
    with pytest.raises(ValueError, match="cpu, gpu"):
        venv.recipe()
