"""`beyondagent verl setup`'s hardware line says what trains where (issue 24, part 6).

Without GPUs it once said "training needs GPUs", although `backend.device: cpu` trains here
(`test_verl_cpu_training.py`); the line now names both devices. No venv is needed.
"""

from __future__ import annotations

from beyondagent_plugin_verl.setup_command import gpu_line


def test_without_gpus_the_line_says_cpu_training_runs_here() -> None:
    line = gpu_line([], "CPU")
    assert "GPUs: none (CPU stack" in line
    assert "training with backend.device: cpu run here" in line
    assert "backend.device: cuda, verl's vLLM stack, needs GPUs" in line
    assert "training needs GPUs" not in line


def test_with_gpus_the_line_lists_them() -> None:
    assert gpu_line(["NVIDIA H100", "NVIDIA H100"], "CUDA") == "  GPUs: 2 (NVIDIA H100, NVIDIA H100)"
