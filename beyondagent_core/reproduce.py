"""`reproduce.json` in a run directory: what it takes to run it again the same way.

The core writes, when the run directory is made: the command line, the spec as run
(`spec.resolved.yaml`, secrets redacted), the project's commit (and whether the checkout had
uncommitted changes), every BeyondAgent distribution's version, python's version and the seed.
The backend adds what only it resolves (`add`): the device, the precision (compute and parameter
dtypes) and the model it loaded — its directory and a sha256 over its files (`model_digest`). A
resumed run keeps each earlier record under `earlier`. A results table names run directories;
this file is how a reader checks one (docs/self-evolve.md).
"""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

from beyondagent_core.logs import get_logger
from beyondagent_core.secrets import MASK, is_secret_key, redact

log = get_logger(__name__)

REPRODUCE_FILE = "reproduce.json"
# a model directory's files that make its behaviour: weights, config, tokenizer, chat template
MODEL_FILES = (".safetensors", ".bin", ".gguf", ".pt", ".json", ".model", ".txt", ".jinja")
DIGEST_MEMO = ".beyondagent-digest"  # no suffix of MODEL_FILES: not part of what it hashes


def project_commit(start: Path | None = None) -> dict[str, Any]:
    """The git commit of the checkout this code runs from, and whether tracked files differ from it;
    `{"commit": None}` for an installed wheel (no checkout) or without git."""
    here = (start or Path(__file__)).resolve().parent
    try:
        commit = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10, check=True).stdout.strip()
        status = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return {"commit": None}
    return {"commit": commit, "uncommitted_changes": bool(status.strip())}


def model_digest(directory: str | Path) -> dict[str, Any]:
    """The model's directory, its files (those of `MODEL_FILES`) and one sha256 over their names and
    contents, in name order: the same digest means the same model. Hashing a large model takes a while,
    so the digest is kept next to the files (`DIGEST_MEMO`, with each file's size and mtime) and reused
    while they are unchanged; a read-only directory is hashed again each time."""
    root = Path(directory)
    if not root.is_dir():  # a hub id or a single file: named, not hashed
        return {"path": str(directory), "sha256": None}
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in MODEL_FILES)
    stamp = [[str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns] for p in files]
    found = {"path": str(root.resolve()), "files": len(files), "bytes": sum(size for _, size, _ in stamp)}
    memo = root / DIGEST_MEMO
    try:
        saved = json.loads(memo.read_text(encoding="utf-8"))
        if saved.get("stamp") == stamp:
            return {**found, "sha256": saved["sha256"]}
    except (OSError, ValueError, KeyError, AttributeError):
        pass
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(root)).encode())
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    try:
        memo.write_text(json.dumps({"stamp": stamp, "sha256": digest.hexdigest()}), encoding="utf-8")
    except OSError:
        pass
    return {**found, "sha256": digest.hexdigest()}


def command_line(argv: list[str]) -> list[str]:
    """The command as run, with a secret given on it masked: a `key=value` override whose last key
    looks secret (`llm.api_key=...`), and anything the log masks (a token's shape, a known secret)."""
    # `python -m beyondagent_core.cli ...` is the same command as `beyondagent ...`
    out = ["beyondagent" if argv and argv[0].endswith(("beyondagent_core/cli.py", "beyondagent_core\\cli.py"))
           else Path(argv[0]).name] if argv else []
    for arg in argv[1:]:
        key, sep, _ = arg.partition("=")
        out.append(f"{key}={MASK}" if sep and is_secret_key(key.rsplit(".", 1)[-1]) else redact(arg))
    return out


def write(run_dir: Path, *, seed: int, packages: dict[str, str | None], resume: bool = False) -> Path:
    """The core's part of `reproduce.json` (a resumed run keeps the earlier records under `earlier`)."""
    path = Path(run_dir) / REPRODUCE_FILE
    earlier = _earlier_records(path) if resume and path.is_file() else []
    record = {"command": command_line(sys.argv), "spec": "spec.resolved.yaml",
              "project": project_commit(), "packages": dict(sorted(packages.items())),
              "python": platform.python_version(), "seed": seed}
    if earlier:
        record["earlier"] = earlier
    path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return path


def _earlier_records(path: Path) -> list[Any]:
    """The records a resumed run keeps: the last one and those it kept. A file that is not what this module
    writes (edited, damaged) is kept as it is, under `unreadable`, never dropped or fatal."""
    try:
        previous = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if not isinstance(previous, dict):
        log.warning("reproduce.earlier_not_a_record", path=str(path), kept_as="earlier[0].unreadable")
        return [{"unreadable": previous}]
    earlier = previous.pop("earlier", [])
    return [*(earlier if isinstance(earlier, list) else [{"unreadable": earlier}]), previous]


def add(run_dir: Path, **fields: Any) -> None:
    """The backend's part (device, precision, model, ...), merged into `reproduce.json`; a run
    directory without one (a run the core did not start) gets nothing, and a write that fails is
    logged, never fatal."""
    path = Path(run_dir) / REPRODUCE_FILE
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(record, dict):
            raise ValueError(f"it holds a JSON {type(record).__name__}, not the object this run wrote")
        record.update(fields)
        path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    except FileNotFoundError:
        return
    except (OSError, ValueError) as exc:
        log.warning("reproduce.not_written", path=str(path), error=str(exc))


def add_launched(run_dir: Path, spec: Any, *, backend: str, device: str) -> None:
    """`add` for a backend that launches another framework (verl, trinity): its device, the precision
    the core's rules give it (`beyondagent_core.precision`), and the model as the spec names it (hashed
    when it is a directory here)."""
    from beyondagent_core.precision import resolve

    precision = resolve(spec.model, gpu=device == "cuda", where=str(spec.path or "the spec"))
    add(run_dir, backend=backend, device=device, precision={"compute": precision.compute, "params": precision.params},
        model={"spec": spec.model.path, **model_digest(spec.model.path)})
