"""The viewer's private per-user folder: indexes of read-only runs and the key that marks indexes as ours.

`$XDG_CACHE_HOME/beyondagent/view` (default `~/.cache/beyondagent/view`), mode 0700 and owned by
the user running the viewer — never a predictable path in a shared temp directory, where another
user could plant an index (or a symlink) first. A folder owned by someone else, or a symlink, is
refused with what to do; a folder of ours with looser permissions is tightened.

`index_key()` is a random 32-byte key kept there (0600): an index signed with it was written by
this user's viewer; any other index (copied in with a run directory, or made by someone else) is
not trusted and is rebuilt.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from beyondagent_core.errors import BeyondAgentError

KEY_FILE = "index.key"
KEY_BYTES = 32
WHERE = "beyondagent view"


def private_dir() -> Path:
    """The folder, created if needed and checked (BeyondAgentError when it cannot be trusted)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    folder = Path(base) / "beyondagent" / "view"
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        folder.mkdir(mode=0o700, exist_ok=True)
        found = os.lstat(folder)
    except OSError as exc:
        raise BeyondAgentError(f"cannot create the viewer's private folder {folder}: {exc.strerror or exc}",
                               where=WHERE, hint="set XDG_CACHE_HOME to a folder of yours") from None
    if not stat.S_ISDIR(found.st_mode):
        raise BeyondAgentError(f"the viewer's private folder {folder} is not a directory (a symlink?)", where=WHERE,
                               hint=f"remove {folder}, or set XDG_CACHE_HOME to a folder of yours")
    if found.st_uid != os.geteuid():
        raise BeyondAgentError(f"the viewer's private folder {folder} belongs to user id {found.st_uid}, not to you "
                               f"({os.geteuid()}): its indexes cannot be trusted", where=WHERE,
                               hint="set XDG_CACHE_HOME to a folder of yours")
    if stat.S_IMODE(found.st_mode) & 0o077:
        os.chmod(folder, 0o700)
    return folder


def index_key() -> bytes:
    """The user's key for signing indexes (made once, atomically, 0600)."""
    folder = private_dir()
    path = folder / KEY_FILE
    for _ in range(2):
        try:
            return _read_key(path)
        except FileNotFoundError:
            _write_key(folder, path)
    return _read_key(path)


def _read_key(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        found = os.fstat(handle.fileno())
        key = handle.read(KEY_BYTES + 1)
    if not stat.S_ISREG(found.st_mode) or found.st_uid != os.geteuid() or len(key) != KEY_BYTES:
        raise BeyondAgentError(f"{path} is not a key the viewer wrote", where=WHERE,
                               hint=f"remove {path}: a new one is made (indexes are rebuilt once)")
    return key


def _write_key(folder: Path, path: Path) -> None:
    """Write the key to a temporary file, then link it into place: a reader never sees half a key,
    and of two viewers starting at once the first link wins."""
    temporary = folder / f".{KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(secrets.token_bytes(KEY_BYTES))
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass
    finally:
        temporary.unlink(missing_ok=True)
