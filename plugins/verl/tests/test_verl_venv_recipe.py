"""verl's venv recipe per stack: the GPU stack adds FlashAttention 2 the way verl installs it."""

from __future__ import annotations

import pytest
from beyondagent_plugin_verl import venv


def test_the_gpu_stack_builds_flash_attn_against_verls_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(venv.STACK_VAR, "gpu")
    monkeypatch.delenv(venv.FLASH_ATTN_VAR, raising=False)
    steps = [list(step) for step in venv.recipe().steps]
    assert steps[0] == [f"verl[vllm]=={venv.VERL_VERSION}"]
    # After verl (its CUDA torch must be there: no build isolation), before the OmegaConf pin.
    assert steps[1] == ["--no-build-isolation", venv.FLASH_ATTN] and steps[-1] == [venv.OMEGACONF]


def test_flash_attn_can_be_left_out_and_the_cpu_stack_never_has_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(venv.STACK_VAR, "gpu")
    monkeypatch.setenv(venv.FLASH_ATTN_VAR, "0")
    assert all(venv.FLASH_ATTN not in step for step in venv.recipe().steps)
    monkeypatch.setenv(venv.STACK_VAR, "cpu")
    monkeypatch.delenv(venv.FLASH_ATTN_VAR)
    assert all(venv.FLASH_ATTN not in step for step in venv.recipe().steps)
