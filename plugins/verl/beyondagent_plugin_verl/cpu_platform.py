"""A CPU "accelerator" for verl's trainer: `backend.device: cpu` (tests and development, no GPU).

verl finds its hardware through `verl.plugin.platform.PlatformRegistry` (public: "external
plugins can register their own platform classes"), picked by `VERL_PLATFORM`. This platform
says: the device is `cpu`, collectives go over gloo, and each trainer worker still asks Ray for
one `GPU` (verl's resource pools are built of GPU bundles) — the launcher starts Ray with that
many *logical* GPUs, which Ray only counts. `device_module` stands in for `torch.cuda`: memory
and stream calls verl makes between phases are no-ops or CPU answers.

Registered when verl imports its `verl.plugins` entry points (`cpu_rollout.register`), in every
process; chosen only when the launcher sets `VERL_PLATFORM=beyondagent_cpu`. Chosen, it also mends two
things verl's critic worker (PPO) assumes of a GPU: the process group's backend string
(`gloo_alone`) and flash-attention in the value model's load (`value_models_in_sdpa`).
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Any

import torch
from verl.plugin.platform.platform_base import PlatformBase

PLATFORM_NAME = "beyondagent_cpu"


class CpuDevice:
    """What verl calls on `torch.cuda` (through `get_torch_device()`), answered for the CPU."""

    Stream = torch.cpu.Stream
    Event = torch.Event

    @staticmethod
    def is_available() -> bool:
        return True

    @staticmethod
    def device_count() -> int:
        return 1

    @staticmethod
    def current_device() -> int:
        return 0

    @staticmethod
    def get_device_name(*_: Any) -> str:
        return "cpu"

    @staticmethod
    def current_stream(*_: Any) -> Any:
        return torch.cpu.current_stream()

    @staticmethod
    def stream(value: Any = None) -> Any:
        return torch.cpu.stream(value)

    @staticmethod
    def get_rng_state(*_: Any) -> torch.Tensor:
        return torch.get_rng_state()

    @staticmethod
    def set_rng_state(state: torch.Tensor, *_: Any) -> None:
        torch.set_rng_state(state)

    @staticmethod
    def mem_get_info(*_: Any) -> tuple[int, int]:
        page = os.sysconf("SC_PAGE_SIZE")
        return os.sysconf("SC_AVPHYS_PAGES") * page, os.sysconf("SC_PHYS_PAGES") * page

    @staticmethod
    def memory_allocated(*_: Any) -> int:
        return 0

    memory_reserved = max_memory_allocated = max_memory_reserved = memory_allocated

    @staticmethod
    def _nothing(*_: Any, **__: Any) -> None:
        return None

    empty_cache = synchronize = set_device = ipc_collect = set_per_process_memory_fraction = _nothing
    manual_seed = manual_seed_all = _nothing


class CpuPlatform(PlatformBase):
    """verl's platform interface on a machine with no accelerator."""

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> Any:
        return CpuDevice

    def is_available(self) -> bool:
        return True

    def current_device(self) -> str:
        # verl moves tensors with `.to(get_device_id())` and `torch.device(get_device_id())`: an index
        # would mean accelerator 0; the device type works in every such call
        return "cpu"

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        return None

    def synchronize(self, device_index: int | None = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "CUDA_VISIBLE_DEVICES"

    @contextmanager
    def nvtx_range(self, msg: str):
        yield

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def ray_resource_name(self) -> str:
        return "GPU"  # logical GPUs: Ray counts them, nothing uses them

    def ray_noset_envvars(self) -> list[str]:
        return ["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"]

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> Any:
        return None


def register() -> None:
    from verl.plugin.platform.platform_manager import PlatformRegistry

    if PlatformRegistry.get(PLATFORM_NAME) is None:
        PlatformRegistry.register(platform=PLATFORM_NAME)(CpuPlatform)
    if os.environ.get("VERL_PLATFORM") == PLATFORM_NAME:
        gloo_alone()
        value_models_in_sdpa()


def gloo_alone() -> None:
    """verl joins a process group with the backend string `cpu:gloo,<device>:<backend>`, which on this
    platform names `cpu` twice, and torch refuses it. The actor's worker joins over plain gloo first
    (cpu_process_group.py, through `model.external_lib`); the engine workers (the critic's) join in
    their constructor, before any such import, so the string itself is mended here: every process
    imports verl's plugins, this one included, before it builds a worker."""
    import torch.distributed as dist

    if getattr(dist.init_process_group, "beyondagent_gloo", False):
        return
    plain = dist.init_process_group

    def init_process_group(backend: Any = None, *args: Any, **kwargs: Any) -> Any:
        if isinstance(backend, str) and backend.replace(" ", "") == "cpu:gloo,cpu:gloo":
            backend = "gloo"
        return plain(backend, *args, **kwargs)

    init_process_group.beyondagent_gloo = True
    dist.init_process_group = init_process_group


def value_models_in_sdpa() -> None:
    """verl loads a critic's value model with `attn_implementation="flash_attention_2"` written into
    `verl.utils.model.load_valuehead_model` (and, failing that, asks for trl's value-head class); on
    this platform there is no flash-attn, so the same load asks for PyTorch's sdpa (the attention the
    actor gets here through `model.override_config`). verl imports the function where it loads."""
    import verl.utils.model as model_utils

    if getattr(model_utils.load_valuehead_model, "beyondagent_sdpa", False):
        return

    def load_valuehead_model(local_path: str, torch_dtype: Any, model_config: Any, trust_remote_code: bool) -> Any:
        from transformers import AutoModelForTokenClassification

        return AutoModelForTokenClassification.from_pretrained(
            pretrained_model_name_or_path=local_path, torch_dtype=torch_dtype, config=model_config,
            attn_implementation="sdpa", trust_remote_code=trust_remote_code)

    load_valuehead_model.beyondagent_sdpa = True
    model_utils.load_valuehead_model = load_valuehead_model
