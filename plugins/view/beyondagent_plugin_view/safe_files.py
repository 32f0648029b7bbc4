"""Opening a run directory's files as untrusted input: no symlink followed, regular files only.

A run directory may come from anywhere (a tarball, a shared disk). Its files are opened with
O_NOFOLLOW, so an `episodes.jsonl` or `spec.resolved.yaml` that is a symlink (to `~/.ssh/id_rsa`,
to `/dev/zero`) is refused rather than followed, and with O_NONBLOCK, so a FIFO cannot hang the
open; what was opened must be a regular file. Reads are bounded by the caller's limit.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO


class UnsafeFile(OSError):
    """A run's file that is not read: a symlink, a FIFO, a device, a directory."""


def open_regular(path: Path) -> BinaryIO:
    """`path` opened for reading in binary; FileNotFoundError when missing, UnsafeFile when not a
    regular file (a symlink is never followed)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeFile(f"{path.name} is a symbolic link: not followed (a run's files are read as they are, "
                             "never through a link)") from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise UnsafeFile(f"{path.name} is not a regular file: not read")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def regular_or_missing(path: Path) -> os.stat_result | None:
    """`path`'s lstat when it is a regular file, None when it does not exist; UnsafeFile otherwise."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(found.st_mode):
        raise UnsafeFile(f"{path.name} is a symbolic link: not followed")
    if not stat.S_ISREG(found.st_mode):
        raise UnsafeFile(f"{path.name} is not a regular file: not read")
    return found


def read_bounded(path: Path, limit: int) -> tuple[bytes, bool]:
    """At most `limit` bytes of `path` and whether there was more (see `open_regular` for errors)."""
    with open_regular(path) as handle:
        data = handle.read(limit + 1)
    return data[:limit], len(data) > limit


def read_text(path: Path, limit: int) -> tuple[str | None, str | None]:
    """(the text, None), or (None, why it is not shown) for a missing or unsafe file; text past
    `limit` bytes is cut with a note."""
    try:
        data, more = read_bounded(path, limit)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, str(exc) if isinstance(exc, UnsafeFile) else f"{path.name} cannot be read: {exc.strerror or exc}"
    text = data.decode("utf-8", errors="replace")
    return (text + f"\n… (cut at {limit} bytes)" if more else text), None
