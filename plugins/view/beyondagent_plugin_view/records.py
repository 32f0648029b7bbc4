"""One line of `episodes.jsonl` as the viewer reads it: parsed, checked, and its indexed columns.

A line is untrusted input. One that would break a page or the index — not JSON, nested deeper
than `MAX_DEPTH`, an integer sqlite cannot store, a token block whose run lengths are not counts
(NaN, 1e400, -3) or that claims more positions than its ids (a mask of 200 million positions for
five tokens) — raises `BadRecord` with the reason, and the index lists the line as a bad record
with its file and line; the rest of the run stays browsable. What passes is safe to show: `token_window` builds only the
tokens a page shows.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from beyondagent_core.episode_records import as_view_record

from beyondagent_plugin_view.bounds import INT64_MAX, MAX_DEPTH, MAX_FIELD_CHARS, MAX_TOKEN_TEXT, MAX_TOKENS, is_int64

COLUMNS = ("step", "split", "idx", "grp", "task_id", "origin", "score", "success", "turns", "tokens", "trained",
           "error", "guided", "bad")
FTS_MAX_CHARS = 20_000  # text per episode given to full-text search
SURROGATES = re.compile("[\ud800-\udfff]")
CONTAINERS = {dict, list}  # what json.loads nests
NUMBERS = {int, float, type(None)}  # bool is not one of them: type(True) is bool


class BadRecord(ValueError):
    """A line that is listed as a bad record (the message says why)."""


def parse_line(raw: bytes) -> dict[str, Any]:
    """The record of one line, as the viewer reads it (`as_view_record`); BadRecord if it cannot be shown."""
    try:
        record = json.loads(raw)
    except RecursionError:
        raise BadRecord("its JSON is nested too deeply to parse") from None
    except ValueError as exc:  # not JSON, not UTF-8, an integer of more than 4300 digits
        raise BadRecord(f"not JSON: {str(exc)[:200]}") from None
    if not isinstance(record, dict):
        raise BadRecord(f"a JSON {type(record).__name__}, not an object")
    record = as_view_record(record)
    check_tokens(record.get("tokens"))  # checked flat, element by element: not walked here
    if too_deep({key: value for key, value in record.items() if key != "tokens"}, MAX_DEPTH):
        raise BadRecord(f"its JSON is nested deeper than {MAX_DEPTH} levels")
    return record


def too_deep(value: Any, limit: int) -> bool:
    """Whether `value` nests lists/objects deeper than `limit` (without recursion; a list or object
    holding no container is passed over in C)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if type(item) is dict else item
        if not CONTAINERS & set(map(type, children)):
            continue
        if depth + 1 > limit:
            return True
        stack.extend((child, depth + 1) for child in children if type(child) in CONTAINERS)
    return False


def _count(value: Any) -> bool:
    return is_int64(value) and value >= 0


def _counts(values: list[Any]) -> bool:
    """Every item a count (checked in C: one record's mask has hundreds of runs)."""
    return not values or (set(map(type, values)) <= {int} and min(values) >= 0 and max(values) <= INT64_MAX)


def _numbers(values: list[Any]) -> bool:
    return set(map(type, values)) <= NUMBERS


def check_tokens(block: Any) -> None:
    """BadRecord unless the token block (when there is one) can be shown safely: flat lists of the
    right types, run lengths that are counts, totals that agree."""
    if not isinstance(block, dict):
        return  # no token view: the episode is shown without one
    ids, mask, vocab = block.get("ids") or [], block.get("mask") or [], block.get("vocab") or {}
    if not isinstance(ids, list) or not isinstance(mask, list) or not isinstance(vocab, dict):
        raise BadRecord("tokens.ids and tokens.mask must be lists, tokens.vocab an object")
    if not set(map(type, ids)) <= {int, str} or not set(map(type, vocab.values())) <= {str}:
        raise BadRecord("tokens.ids must hold token ids, tokens.vocab their texts")
    if not _counts(mask):
        position, run = next((i, run) for i, run in enumerate(mask) if not _count(run))
        raise BadRecord(f"tokens.mask[{position}] is {_short(run)}, not a count of positions")
    positions = sum(mask)
    if positions > MAX_TOKENS:
        raise BadRecord(f"tokens.mask claims {positions} positions, more than the limit of {MAX_TOKENS}")
    if positions != len(ids):
        raise BadRecord(f"tokens.mask claims {positions} positions but tokens.ids has {len(ids)}")
    logprobs = block.get("logprobs") or []
    if not isinstance(logprobs, list) or len(logprobs) > positions or not _numbers(logprobs):
        raise BadRecord("tokens.logprobs must be a list of numbers, at most one per position")
    advantages = block.get("advantages")
    if advantages is not None:
        if not isinstance(advantages, list) or not all(isinstance(run, list) and len(run) == 2 for run in advantages) \
                or not _numbers([run[0] for run in advantages]) or not _counts([run[1] for run in advantages]):
            raise BadRecord("tokens.advantages must be [value, count] runs")
        if sum(run[1] for run in advantages) != positions:
            raise BadRecord(f"tokens.advantages covers {sum(run[1] for run in advantages)} positions, "
                            f"tokens.ids has {positions}")
    start = block.get("prompt_length")
    if start is not None and not (_count(start) and start <= positions):
        raise BadRecord(f"tokens.prompt_length is {_short(start)}, not a position in the block")


def token_window(record: dict[str, Any], start: int = 0, limit: int = MAX_TOKENS) -> tuple[list[dict[str, Any]], int]:
    """One `{"id", "text", "mask", "logprob", "advantage"}` per token of positions `start` to
    `start + limit` of a checked record, and the block's number of positions ([], 0 without tokens).

    Only the window is built (the mask and advantages are walked as runs), so a long episode costs
    what is shown. A token's text is cut at `MAX_TOKEN_TEXT` characters.
    """
    block = record.get("tokens")
    if not isinstance(block, dict):
        return [], 0
    ids, vocab = block.get("ids") or [], block.get("vocab") or {}
    logprobs = block.get("logprobs") or []
    end = min(len(ids), start + limit)
    masks = _runs_at([(position % 2, count) for position, count in enumerate(block.get("mask") or [])], start, end)
    advantage_runs = block.get("advantages")
    advantages = _runs_at(advantage_runs, start, end) if advantage_runs is not None else [None] * max(0, end - start)
    trained_before = _trained_before(block.get("mask") or [], start)
    rows = []
    for position, bit, advantage in zip(range(start, end), masks, advantages, strict=True):
        logprob = None
        if bit:
            logprob = logprobs[trained_before] if trained_before < len(logprobs) else None
            trained_before += 1
        token_id = ids[position]
        piece = vocab.get(str(token_id), "\ufffd") if isinstance(token_id, int | str) else "\ufffd"
        rows.append({"id": token_id, "text": clean(piece if isinstance(piece, str) else str(piece), MAX_TOKEN_TEXT),
                     "mask": bit, "logprob": logprob, "advantage": advantage})
    return rows, len(ids)


def _trained_before(mask: list[int], start: int) -> int:
    """How many positions before `start` have mask 1 (their log-probs come first in the list)."""
    trained = position = 0
    for index, count in enumerate(mask):
        if position >= start:
            break
        take = min(count, start - position)
        trained += take if index % 2 else 0
        position += take
    return trained


def _runs_at(runs: list[Any], start: int, end: int) -> list[Any]:
    """The values of positions `start` to `end` of `[value, count]` runs."""
    values: list[Any] = []
    position = 0
    for value, count in runs:
        if position >= end:
            break
        low, high = max(position, start), min(position + count, end)
        if high > low:
            values.extend([value] * (high - low))
        position += count
    return values


def row_values(record: dict[str, Any]) -> dict[str, Any]:
    """The indexed columns of one record (missing fields are None); BadRecord for a number sqlite
    cannot store."""
    for key in ("step", "index"):
        value = record.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and not is_int64(value):
            raise BadRecord(f"{key} is {_short(value)}, beyond the 64-bit integers the index holds")
    block = record.get("tokens") if isinstance(record.get("tokens"), dict) else {}
    mask = block.get("mask") or []
    group = record.get("group")
    turns = record.get("turns") if isinstance(record.get("turns"), list) else []
    return {
        "step": record.get("step") if is_int64(record.get("step")) else None,
        "split": text(record.get("split")),
        "idx": record.get("index") if is_int64(record.get("index")) else None,
        "grp": text(group), "task_id": text(record.get("task_id")),
        "origin": text(record.get("origin")), "score": finite(record.get("score")),
        "success": int(bool(record.get("success"))), "turns": len(turns), "tokens": sum(mask),
        "trained": sum(mask[1::2]), "error": text(record.get("error")), "guided": int(bool(record.get("guided"))),
    }


def finite(value: Any) -> float | None:
    """A number as a finite float (None for anything else: NaN, 1e400, text, 10**400)."""
    if type(value) is float:  # the common case, first
        return value if math.isfinite(value) else None
    if type(value) is not int:
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def text(value: Any, limit: int = MAX_FIELD_CHARS) -> str | None:
    """A field as bounded text that sqlite and UTF-8 accept (lone surrogates replaced)."""
    if value is None:
        return None
    return clean(value if isinstance(value, str) else str(value), limit)


def clean(value: str, limit: int) -> str:
    """`value` cut at `limit` characters, a lone surrogate (from a JSON escape) replaced by U+FFFD."""
    value = value[:limit]
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        value = SURROGATES.sub("\ufffd", value)
    return value


def search_text(record: dict[str, Any]) -> str:
    """What full-text search looks in: the turns, the task id, the judge's reason and the error."""
    parts = [str(record.get(key) or "") for key in ("task_id", "reason", "error")]
    for turn in record.get("turns") or []:
        if isinstance(turn, dict):
            parts.append(str(turn.get("content") or ""))
    return clean("\n".join(part for part in parts if part), FTS_MAX_CHARS)


def _short(value: Any) -> str:
    shown = repr(value) if not isinstance(value, int) or isinstance(value, bool) or is_int64(value) \
        else f"an integer of {value.bit_length()} bits"
    return shown if len(shown) <= 40 else shown[:40] + "…"
