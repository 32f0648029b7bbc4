"""`events.jsonl`: a run directory's events, one JSON object a line, tagged and bounded by run.

Every line starts with the `run_id` of the command that wrote it (`beyondagent run`, `explore`,
each `--resume`: one id per invocation, `<UTC time>-<random>`, so ids sort by start time), so
the lines of one attempt can be told from another's. A directory run again and again keeps
appending to one file, so opening it for a new run first drops the lines of all but the last
`KEEP_RUNS - 1` runs (rewritten beside it and renamed over it, never half-written): the file
holds the events of at most the last `KEEP_RUNS` runs. Lines written before run ids existed
count as one run, the oldest.
"""

from __future__ import annotations

import os
import re
import secrets
import tempfile
import time
from pathlib import Path

KEEP_RUNS = 10
# Our writer puts the id first (`logs._write_json_line`), so reading it needs no JSON parse of
# what may be a large file.
_RUN_ID = re.compile(rb'^\{"run_id": "([^"\\]*)"')


def new_run_id() -> str:
    """`20261125T184632.123456Z-1b379f`: the start time to the microsecond, then a random tail."""
    now = time.time()
    return f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime(now))}.{int(now % 1 * 1e6):06d}Z-{secrets.token_hex(3)}"


def run_of(line: bytes) -> str | None:
    """The run id a line was written under; None for a line from before run ids (or not ours)."""
    found = _RUN_ID.match(line)
    return found.group(1).decode("utf-8", "replace") if found else None


def runs_in(path: Path) -> list[str | None]:
    """The runs with lines in `path`, oldest first (by their first line)."""
    seen: dict[str | None, None] = {}
    with path.open("rb") as handle:
        for line in handle:
            if line.strip():
                seen.setdefault(run_of(line))
    return list(seen)


def keep_last_runs(path: Path, keep: int) -> int:
    """Drop the lines of all but the last `keep` runs in `path`; returns how many runs were dropped."""
    if keep < 0:
        raise ValueError(f"keep must be 0 or more, got {keep}")
    if not path.is_file():
        return 0
    runs = runs_in(path)
    if len(runs) <= keep:
        return 0
    kept = set(runs[len(runs) - keep:]) if keep else set()
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as out, path.open("rb") as source:
            for line in source:
                if line.strip() and run_of(line) in kept:
                    out.write(line if line.endswith(b"\n") else line + b"\n")
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return len(runs) - len(kept)
