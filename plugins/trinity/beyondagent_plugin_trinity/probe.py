"""What trinity's venv has (run in it by `beyondagent trinity setup`); one JSON line on stdout."""

from __future__ import annotations

import json
from importlib import metadata


def main() -> dict:
    import torch

    from beyondagent_plugin_trinity.registration import status

    versions = {name: metadata.version(name) for name in ("trinity-rft", "verl", "torch", "transformers", "ray",
                                                           "numpy", "pyarrow")}
    try:
        vllm = metadata.version("vllm")
    except metadata.PackageNotFoundError:
        vllm = None
    gpus = ([torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
            if torch.cuda.is_available() else [])
    return {**versions, "vllm": vllm, "gpus": gpus, "registration": status()}


if __name__ == "__main__":
    print(json.dumps(main()))
