"""verl checkpoints as Hugging Face model directories, for `beyondagent eval --checkpoint`.

verl 0.9.1 saves `<run_dir>/checkpoints/global_step_N/actor/`: one FSDP shard per rank
(`model_world_size_W_rank_R.pt`, plus optimizer and extra state), `fsdp_config.json`, and
`huggingface/` (the config and tokenizer, no weights); `latest_checkpointed_iteration.txt` next to
the `global_step_N` folders names the newest. verl's own model merger joins the shards into one
HF model on CPU, in verl's venv:

    python -m verl.model_merger merge --backend fsdp --local_dir .../actor --target_dir OUT

`find_actor_dir(path)` says which checkpoint a path means (a run directory, its `checkpoints/`,
a `global_step_N`, its `actor/` or `actor/huggingface/`); `merged_model(path)` merges it once into
`global_step_N/merged_hf/` (written aside, then renamed into place; `merge.json` there records the
shards it came from and how long it took) and returns that directory. A later call finds it and
merges nothing; a checkpoint whose shards changed is merged again. The merger writes bfloat16
weights (verl's choice).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from beyondagent_core.errors import DataError, RunError

MERGED_DIR = "merged_hf"
RECORD_FILE = "merge.json"
TRACKER = "latest_checkpointed_iteration.txt"
SHARD = re.compile(r"model_world_size_(\d+)_rank_(\d+)\.pt")
MERGE_TIMEOUT_S = 3 * 3600


def _is_actor(path: Path) -> bool:
    return path.is_dir() and ((path / "fsdp_config.json").is_file() or any(_shards(path)))


def _shards(actor: Path) -> list[Path]:
    return sorted(p for p in actor.iterdir() if SHARD.fullmatch(p.name)) if actor.is_dir() else []


def _step(path: Path) -> int:
    return int(path.name.removeprefix("global_step_")) if path.name.removeprefix("global_step_").isdigit() else -1


def _newest_step(folder: Path) -> Path | None:
    """The `global_step_N` verl's tracker names, else the highest one with an actor."""
    tracker = folder / TRACKER
    if tracker.is_file():
        named = folder / f"global_step_{tracker.read_text().strip()}"
        if _is_actor(named / "actor"):
            return named
    steps = [p for p in folder.glob("global_step_*") if _step(p) >= 0 and _is_actor(p / "actor")]
    return max(steps, key=_step) if steps else None


def find_actor_dir(path: str | Path) -> Path | None:
    """The `actor/` folder of the verl checkpoint `path` means, or None when it is not one."""
    root = Path(path)
    if root.name == "huggingface" and _is_actor(root.parent):
        return root.parent
    if _is_actor(root):
        return root
    if _is_actor(root / "actor"):
        return root / "actor"
    for folder in (root, root / "checkpoints"):
        step = _newest_step(folder) if folder.is_dir() else None
        if step is not None:
            return step / "actor"
    return None


def merged_dir(actor: Path) -> Path:
    """Where `actor`'s merged model lives: next to it, in `global_step_N/merged_hf/`."""
    return actor.parent / MERGED_DIR


def fingerprint(actor: Path) -> list[list[Any]]:
    """The shards (name, size, mtime): a checkpoint written again is merged again."""
    files = [*_shards(actor), actor / "fsdp_config.json"]
    return [[p.name, p.stat().st_size, p.stat().st_mtime_ns] for p in files if p.is_file()]


def check_actor(actor: Path) -> None:
    """A checkpoint the merger can read: every rank's shard and the HF config; DataError naming what is missing."""
    shards = _shards(actor)
    if not shards:
        raise DataError(f"{actor} holds no model shards (model_world_size_W_rank_R.pt)", where="--checkpoint",
                        hint="was it saved with checkpoint.save_contents including 'model'? pass another step")
    world = int(SHARD.fullmatch(shards[0].name).group(1))  # type: ignore[union-attr]
    missing = sorted(set(range(world)) - {int(SHARD.fullmatch(p.name).group(2)) for p in shards})  # type: ignore[union-attr]
    if missing:
        raise DataError(f"{actor} is missing the shards of rank(s) {missing[:8]} of {world}", where="--checkpoint",
                        hint="the checkpoint was not written completely; pass an earlier global_step_N")
    if not (actor / "huggingface" / "config.json").is_file():
        raise DataError(f"{actor / 'huggingface'} has no config.json: verl's merger needs the model's config there",
                        where="--checkpoint", hint="copy the base model's config.json and tokenizer files there")


def cached(actor: Path) -> Path | None:
    """The merged model of `actor` if it was merged from these very shards."""
    target = merged_dir(actor)
    try:
        record = json.loads((target / RECORD_FILE).read_text())
    except (OSError, ValueError):
        return None
    return target if record.get("shards") == fingerprint(actor) and (target / "config.json").is_file() else None


def merge_command(actor: Path, target: Path) -> list[str]:
    """verl's merger, as `python` arguments in verl's venv."""
    return ["-m", "verl.model_merger", "merge", "--backend", "fsdp", "--local_dir", str(actor),
            "--target_dir", str(target)]


def merged_model(path: str | Path, *, venv: Any = None, say: Callable[[str], None] = print) -> Path:
    """The HF directory of the verl checkpoint `path` means, merged first if it is not yet."""
    actor = find_actor_dir(path)
    if actor is None:
        raise DataError(f"{path} is not a verl checkpoint: no global_step_N/actor with model shards there",
                        where="--checkpoint", hint="pass runs/<name> or runs/<name>/checkpoints/global_step_N")
    actor = actor.resolve()
    check_actor(actor)
    found = cached(actor)
    if found is not None:
        say(f"verl checkpoint {actor.parent}: using its merged model {found}")
        return found
    if venv is None:  # verl's venv (built first if missing: minutes, shown on stderr)
        from rich.console import Console

        from beyondagent_plugin_verl.setup_command import ensure

        venv = ensure(console=Console(stderr=True, highlight=False))
    target = merged_dir(actor)
    partial = target.with_name(f".{target.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    say(f"verl checkpoint {actor.parent}: merging its FSDP shards into an HF model at {target} "
        f"(once; later evals use it) with verl's model merger...")
    started = time.monotonic()
    try:
        result = venv.run(merge_command(actor, partial), timeout=MERGE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        shutil.rmtree(partial, ignore_errors=True)
        raise RunError(f"verl's model merger took over {MERGE_TIMEOUT_S} s on {actor}", where=str(actor)) from None
    seconds = time.monotonic() - started
    if result.returncode != 0 or not (partial / "config.json").is_file():
        shutil.rmtree(partial, ignore_errors=True)
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
        raise RunError(f"verl's model merger failed on {actor} (exit {result.returncode}):\n{tail}",
                       where=str(actor), hint=f"run it by hand to see all: {venv.python} "
                                              f"{' '.join(merge_command(actor, target))}")
    (partial / RECORD_FILE).write_text(json.dumps({"source": str(actor), "shards": fingerprint(actor),
                                                   "seconds": round(seconds, 1), "merged_at": time.time()}, indent=2))
    shutil.rmtree(target, ignore_errors=True)
    partial.replace(target)
    say(f"verl checkpoint merged in {seconds:.1f} s: {target}")
    return target
