"""A step's CUDA memory peaks (`device_memory.py`). No GPU here: CUDA's counters are stood in for by
monkeypatched `torch.cuda` functions, which checks the names, the units and the reset per step;
the GPU ablation (`scripts/gpu/ablation.sh`) reads the real ones."""

from __future__ import annotations

import pytest
import torch
from beyondagent_plugin_torch.device_memory import GIB, peak_metrics, reset_peak

from beyondagent_core import metric_names


def test_nothing_is_reported_on_a_cpu() -> None:
    reset_peak("cpu")
    reset_peak(torch.device("cpu"))
    assert peak_metrics("cpu") == {}


def test_on_cuda_the_peaks_since_the_reset_in_gib(monkeypatch: pytest.MonkeyPatch) -> None:
    resets = []
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda device: resets.append(device))
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device: 3 * GIB)
    monkeypatch.setattr(torch.cuda, "max_memory_reserved", lambda device: 5 * GIB // 2)
    reset_peak("cuda:0")
    assert resets == ["cuda:0"]
    assert peak_metrics(torch.device("cuda:0")) == {metric_names.PERF_MAX_MEMORY_ALLOCATED_GB: 3.0,
                                                     metric_names.PERF_MAX_MEMORY_RESERVED_GB: 2.5}
    assert metric_names.PERF_MAX_MEMORY_ALLOCATED_GB == "perf/max_memory_allocated_gb"  # verl's name
