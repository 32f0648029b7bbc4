"""The trainer workers' process group on CPU: gloo alone (imported through `model.external_lib`).

verl joins its workers with the backend string `cpu:gloo,<device>:<backend>`, which on a CPU
platform names `cpu` twice and torch refuses it. verl skips its own call when a process group
exists, and imports `actor_rollout_ref.model.external_lib` in each worker just before (building
the model config, at the start of `init_model`); `backend.device: cpu` points that key here, so
this import joins the group first with plain gloo. Outside a verl worker (no `WG_BACKEND=ray`
and rank variables, e.g. the driver or an agent-loop worker) it does nothing.
"""

from __future__ import annotations

import os
from datetime import timedelta


def join() -> bool:
    """Init the default process group over gloo; True if this process is a verl worker that did."""
    import torch.distributed as dist

    env = os.environ
    keys = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
    worker = env.get("WG_BACKEND") == "ray" and all(k in env for k in keys)
    if not worker:
        return False
    if dist.is_initialized():
        return False
    dist.init_process_group(backend="gloo", rank=int(env["RANK"]), world_size=int(env["WORLD_SIZE"]),
                            timeout=timedelta(minutes=30))
    return True


join()
