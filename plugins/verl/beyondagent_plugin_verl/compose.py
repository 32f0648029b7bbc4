"""Compose verl's own `ppo_trainer` config and validate it with verl's validator (runs in verl's venv).

    python -m beyondagent_plugin_verl.compose REQUEST.json    (`beyondagent run --dry-run`; a run composes
                                                             in its trainer's process: trainer.py)

The request (written by `launcher.py`) holds the overrides `[verl key, value, our key]`, where to
write the composed config, and the model path (`tiny`: the locally built test model, built here
by beyondagent-plugin-torch's code). The last line of stdout is one JSON object: `{"ok": true,
...}` or `{"ok": false, "error", "key", "origin", "suggestions"}`, which the launcher turns into
our usual key-path error. A key verl does not have is an error (with the closest keys verl has);
`+key` adds one, as on verl's command line.
"""

from __future__ import annotations

import contextlib
import difflib
import io
import json
import sys
import time
from pathlib import Path
from typing import Any

_MISSING = object()


class ComposeError(Exception):
    def __init__(self, message: str, *, key: str | None = None, origin: str | None = None,
                 suggestions: list[str] | None = None):
        super().__init__(message)
        self.key, self.origin, self.suggestions = key, origin, suggestions or []


MODEL_PATH_KEYS = ("critic.model.path", "critic.model.tokenizer_path")


def resolve_model_path(path: str, *, origin: str = "model.path") -> str:
    """`tiny`, a known model name (`smollm2-135m-instruct`) or a `.gguf` file -> the cached checkpoint
    directory the torch plugin builds, fetches or converts (once); anything else as is. `origin`: the
    spec key the path came from, for errors."""
    try:
        from beyondagent_plugin_torch.models import is_prepared_here, resolve_model_path as resolve_with_torch_plugin
    except ImportError as exc:
        if path == "tiny" or path.lower().endswith(".gguf"):
            raise ComposeError(f"{origin} is {path!r} but beyondagent-plugin-torch (which builds, fetches and "
                               f"converts models) is not in verl's venv: {exc}", origin=origin) from None
        return path
    if not is_prepared_here(path):
        return path
    try:
        return resolve_with_torch_plugin(path)
    except Exception as exc:  # noqa: BLE001 - a fetch or conversion error, said with the key it came from
        raise ComposeError(f"{origin} {path!r} could not be prepared: {exc}", origin=origin) from None


def compose_base() -> Any:
    """verl's `ppo_trainer` config exactly as `python -m verl.trainer.main_ppo` composes it."""
    import verl
    from hydra import compose, initialize_config_dir

    config_dir = Path(verl.__file__).parent / "trainer" / "config"
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return compose(config_name="ppo_trainer")


def _node_keys(cfg: Any, parent: str) -> list[str]:
    from omegaconf import DictConfig, OmegaConf

    node = OmegaConf.select(cfg, parent, default=None, throw_on_missing=False) if parent else cfg
    return [str(k) for k in node.keys()] if isinstance(node, DictConfig) else []  # noqa: SIM118 - ??? keys too


def _exists(cfg: Any, key: str) -> bool:
    from omegaconf import DictConfig

    node = cfg
    for part in key.split("."):
        if not isinstance(node, DictConfig) or part not in node.keys():  # noqa: SIM118 - `in node` is False for ??? values
            return False
        node = node._get_node(part)
    return True


def _suggest(cfg: Any, key: str) -> list[str]:
    parent, _, leaf = key.rpartition(".")
    while parent and not _exists(cfg, parent):
        parent, _, leaf = parent.rpartition(".")
    siblings = _node_keys(cfg, parent)
    close = difflib.get_close_matches(leaf, siblings, n=3, cutoff=0.6)
    return [f"{parent}.{name}" if parent else name for name in close]


def apply_overrides(cfg: Any, overrides: list[list[Any]]) -> None:
    """Set each `[key, value, origin]`; an unknown key is a ComposeError naming both keys."""
    from omegaconf import DictConfig, OmegaConf

    for key, value, origin in overrides:
        add = key.startswith("+")
        key = key.lstrip("+")
        if not _exists(cfg, key) and not add:
            parent = key.rpartition(".")[0]
            parent_node = OmegaConf.select(cfg, parent, default=None, throw_on_missing=False) if parent else None
            # A mapping verl leaves empty (engine_kwargs: {}) takes keys of the user's choosing.
            if not (isinstance(parent_node, DictConfig) and len(parent_node) == 0):
                raise ComposeError(f"verl has no key {key!r}", key=key, origin=origin, suggestions=_suggest(cfg, key))
        try:
            with _open_struct(cfg):
                OmegaConf.update(cfg, key, value, merge=False, force_add=True)
        except Exception as exc:  # noqa: BLE001 - omegaconf raises several types: report verbatim
            raise ComposeError(f"verl key {key!r} cannot be set to {value!r}: {exc}", key=key, origin=origin) from None


@contextlib.contextmanager
def _open_struct(cfg: Any):
    from omegaconf import OmegaConf

    OmegaConf.set_struct(cfg, False)
    try:
        yield
    finally:
        OmegaConf.set_struct(cfg, True)


def validate(cfg: Any) -> None:
    """verl's own checks, as `main_ppo.main` runs them (its prints go to stderr)."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    with contextlib.redirect_stdout(io.StringIO()) as printed:
        try:
            validate_config(config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
        except Exception as exc:  # noqa: BLE001 - verl asserts, raises ValueError, or fails instantiating
            raise ComposeError(f"verl's validate_config rejected the config: {type(exc).__name__}: {exc}") from None
    sys.stderr.write(printed.getvalue())


def main(request_path: str) -> dict[str, Any]:
    from omegaconf import OmegaConf

    started = time.monotonic()
    request = json.loads(Path(request_path).read_text())
    model_path = resolve_model_path(request["model_path"])
    # the policy's path, and the critic's model and tokenizer (PPO) where they name a model the same way
    overrides = [[k, model_path if k == "actor_rollout_ref.model.path"
                  else resolve_model_path(v, origin=o) if k in MODEL_PATH_KEYS and isinstance(v, str) else v, o]
                 for k, v, o in request["overrides"]]
    cfg = compose_base()
    composed = time.monotonic()
    apply_overrides(cfg, overrides)
    validate(cfg)
    out = Path(request["out"])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(OmegaConf.to_yaml(cfg))
    import torch
    import verl

    from beyondagent_plugin_verl.probe import agent_loop_status

    gpus = ([torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
            if torch.cuda.is_available() else [])
    return {"ok": True, "config": str(out), "model_path": model_path, "agent_loop": agent_loop_status(),
            "verl": verl.__version__, "gpus": gpus,
            "compose_s": round(composed - started, 2), "total_s": round(time.monotonic() - started, 2)}


def answer(request_path: str) -> dict[str, Any]:
    """`main`'s answer, or `{"ok": false, ...}` for a key verl rejected (what the launcher reads)."""
    try:
        return main(request_path)
    except ComposeError as exc:
        return {"ok": False, "error": str(exc), "key": exc.key, "origin": exc.origin, "suggestions": exc.suggestions}


if __name__ == "__main__":
    print(json.dumps(answer(sys.argv[1]), default=str))
