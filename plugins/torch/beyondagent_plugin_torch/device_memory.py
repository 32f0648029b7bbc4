"""A step's CUDA memory, as verl reports it: the peak allocated and the peak reserved, in GiB.

For sizing runs that share one GPU (an ablation's arms side by side): the caching allocator keeps
what a step reserved, so `perf/max_memory_reserved_gb` is what the process holds from the other
processes until it exits. Nothing is reported on a CPU.
"""

from __future__ import annotations

from typing import Any

from beyondagent_core import metric_names

GIB = 1 << 30


def reset_peak(device: Any) -> None:
    """Start a step's peak at what is allocated now (no-op off CUDA)."""
    import torch

    if torch.device(device).type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_metrics(device: Any) -> dict[str, float]:
    """The peaks since `reset_peak(device)`, in GiB; {} off CUDA."""
    import torch

    if torch.device(device).type != "cuda":
        return {}
    return {metric_names.PERF_MAX_MEMORY_ALLOCATED_GB: torch.cuda.max_memory_allocated(device) / GIB,
            metric_names.PERF_MAX_MEMORY_RESERVED_GB: torch.cuda.max_memory_reserved(device) / GIB}
