"""Compose Trinity-RFT's `Config` from our overrides and validate it with trinity's own
`check_and_update` (runs in trinity's venv).

    python -m beyondagent_plugin_trinity.compose REQUEST.json

The request (written by `backend.py`) holds the overrides `[trinity key, value, our key]`, where
to write the validated config, and the model path (`tiny`: the locally built test model, built
here by beyondagent-plugin-torch's code). The keys are set on `OmegaConf.structured(Config)`,
trinity's schema, exactly as its `load_config` merges a YAML file: a key trinity does not have is
an error with the closest keys it has; `+key` adds one. Our Workflow and ADVANTAGE_FN are
registered first (trinity's validator looks the names up). The last line of stdout is one JSON
object: `{"ok": true, ...}` or `{"ok": false, "error", "key", "origin", "suggestions"}`, which the
backend turns into our usual key-path error.

The cluster: trinity plans its GPUs from `cluster.node_num` x `cluster.gpu_per_node`; when they
are unset it asks Ray what this machine has, and on a machine without GPUs its validator divides
by that zero. The mapping always declares them (backend.nodes, backend.gpus_per_node), so the
config is validated for the cluster the spec describes, wherever the dry run happens. trinity's
GPU memory advisor only prints (`NO GPU DETECTED` on a CPU); its output goes to stderr.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import time
from pathlib import Path
from typing import Any


class ComposeError(Exception):
    def __init__(self, message: str, *, key: str | None = None, origin: str | None = None,
                 suggestions: list[str] | None = None):
        super().__init__(message)
        self.key, self.origin, self.suggestions = key, origin, suggestions or []


def resolve_model_path(path: str) -> str:
    """`tiny`, a known model name or a `.gguf` file -> the checkpoint directory the torch plugin
    builds, fetches or converts (once); anything else as is."""
    try:
        from beyondagent_plugin_torch.models import is_prepared_here
        from beyondagent_plugin_torch.models import resolve_model_path as resolve_with_torch_plugin
    except ImportError as exc:
        if path == "tiny" or path.lower().endswith(".gguf"):
            raise ComposeError(f"model.path is {path!r} but beyondagent-plugin-torch (which builds, fetches and "
                               f"converts models) is not in trinity's venv: {exc}", origin="model.path") from None
        return path
    if not is_prepared_here(path):
        return path
    try:
        return resolve_with_torch_plugin(path)
    except Exception as exc:  # noqa: BLE001 - a fetch or conversion error, said with the key it came from
        raise ComposeError(f"model.path {path!r} could not be prepared: {exc}", origin="model.path") from None


def compose(overrides: list[list[Any]]) -> Any:
    """trinity's `Config` with our overrides set (trinity's schema checks each key and type)."""
    from omegaconf import OmegaConf
    from trinity.common.config import Config

    from beyondagent_core.native_overrides import BadValue, UnknownKey, apply_overrides

    cfg = OmegaConf.structured(Config)
    try:
        apply_overrides(cfg, overrides, framework="Trinity-RFT", structured=True)
    except UnknownKey as exc:
        raise ComposeError(str(exc), key=exc.key, origin=exc.origin, suggestions=exc.suggestions) from None
    except BadValue as exc:
        raise ComposeError(str(exc), key=exc.key, origin=exc.origin) from None
    try:
        return OmegaConf.to_object(cfg)
    except Exception as exc:  # noqa: BLE001 - a nested value trinity's dataclasses refuse
        raise ComposeError(f"Trinity-RFT's Config refused the composed values: {type(exc).__name__}: {exc}") from None


def validate(config: Any) -> None:
    """trinity's own checks (`Config.check_and_update`), as `trinity run` runs them; its prints go to stderr."""
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        try:
            config.check_and_update()
        except Exception as exc:  # noqa: BLE001 - trinity raises ValueError, KeyError, ImportError...
            raise ComposeError(f"Trinity-RFT's check_and_update rejected the config: {type(exc).__name__}: {exc}") from None
    sys.stderr.write(printed.getvalue())


def main(request_path: str) -> dict[str, Any]:
    import torch
    from importlib import metadata

    from beyondagent_plugin_trinity.registration import register, status

    started = time.monotonic()
    request = json.loads(Path(request_path).read_text())
    model_path = resolve_model_path(request["model_path"])
    overrides = [[k, model_path if k == "model.model_path" else v, o] for k, v, o in request["overrides"]]
    register()
    config = compose(overrides)
    composed = time.monotonic()
    validate(config)
    out = Path(request["out"])
    out.parent.mkdir(parents=True, exist_ok=True)
    config.save(str(out))
    gpus = ([torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
            if torch.cuda.is_available() else [])
    return {"ok": True, "config": str(out), "model_path": model_path, "registration": status(),
            "trinity": metadata.version("trinity-rft"), "gpus": gpus, "mode": config.mode,
            "cluster": {"gpus": config.cluster.total_gpu_num, "explorer_gpus": config.cluster.explorer_gpu_num,
                        "trainer_gpus": config.cluster.trainer_gpu_num},
            "compose_s": round(composed - started, 2), "total_s": round(time.monotonic() - started, 2)}


if __name__ == "__main__":
    try:
        result = main(sys.argv[1])
    except ComposeError as exc:
        result = {"ok": False, "error": str(exc), "key": exc.key, "origin": exc.origin, "suggestions": exc.suggestions}
    print(json.dumps(result, default=str))
