"""The viewer's limits: what one request may ask for and what one record may claim.

A run directory is untrusted input (it may come from a tarball or another user's cluster job), so
every number that reaches sqlite, a loop or an allocation is checked here first: query and path
numbers must fit sqlite's 64-bit integers (else a 400, never a 500), and a record's sizes are
capped so that one line cannot make a page allocate gigabytes or render for minutes.
"""

from __future__ import annotations

from typing import Any

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

MAX_LINE_BYTES = 32 * 2**20  # one line of episodes.jsonl; a longer one is a bad record
MAX_TOKENS = 1_000_000  # positions in one record's token block
MAX_DEPTH = 64  # nesting of a record's JSON
MAX_FIELD_CHARS = 2_000  # an indexed text column (task id, split, error...)
MAX_TURN_CHARS = 20_000  # one turn's text on a page
MAX_TURNS_SHOWN = 500  # turns on one episode page
MAX_TOKENS_SHOWN = 20_000  # token spans on one episode page (and in one JSON reply)
MAX_CARD_TOKENS = 2_000  # token spans on one card of a group page
MAX_TOKEN_TEXT = 200  # characters of one token's text
MAX_GROUP_SHOWN = 64  # cards on a group page
MAX_COMPARE_ROWS = 2_000  # tasks in a comparison
MAX_TEXT_FILE_BYTES = 2 * 2**20  # spec.resolved.yaml, plugins.json
MAX_METRICS_BYTES = 16 * 2**20  # metrics.jsonl read for the curves (its first part; parsed once per change)
MAX_METRIC_RECORDS = 20_000  # records kept of it, evenly spaced, the last one kept: the curves and panels
MAX_SERIES = 200  # metrics charted
MAX_CHART_POINTS = 2_000  # points of one chart's line
MAX_CURVE_POINTS = 200_000  # points of every series together in one /api/curves reply (each at least a chart's)


def is_int64(value: Any) -> bool:
    """An int (not a bool) that sqlite can store."""
    return isinstance(value, int) and not isinstance(value, bool) and INT64_MIN <= value <= INT64_MAX


def int64(text: str, what: str) -> int:
    """`text` as an integer within sqlite's range; ValueError (a 400) naming `what` otherwise."""
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{what} must be an integer, got {text[:40]!r}") from None
    check_int64(value, what)
    return value


def check_int64(value: int, what: str) -> int:
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"{what} is out of range: numbers here fit in 64 bits ({INT64_MIN} to {INT64_MAX})")
    return value
