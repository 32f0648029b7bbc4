"""The episode list's filters, sorting and paging, as SQL over an `EpisodeIndex`.

`ListQuery.from_params` reads the request's query string (unknown or malformed values are
ignored, so a hand-edited URL never fails; a number beyond 64 bits is a ValueError, a 400);
`list_episodes` returns one page and the total. Sorting is on whitelisted columns only, with the
row id as the tie-break, so pages are stable.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs

from beyondagent_plugin_view.bounds import INT64_MAX, MAX_GROUP_SHOWN, check_int64
from beyondagent_plugin_view.index import EpisodeIndex

SORTS = {"step": "step", "task": "task_id", "origin": "origin", "group": "grp", "score": "score",
         "success": "success", "turns": "turns", "tokens": "tokens", "trained": "trained", "error": "error",
         "line": "id"}
LIST_COLUMNS = ("id", "line", "step", "split", "idx", "grp", "task_id", "origin", "score", "success", "turns",
                "tokens", "trained", "error", "guided", "bad")
PER_PAGE = 50
MAX_PER_PAGE = 500
MAX_PAGE = INT64_MAX // MAX_PER_PAGE  # the row offset of any page fits in 64 bits
TOKEN = re.compile(r"\w+", re.UNICODE)


@attrs.frozen
class ListQuery:
    split: str = ""
    step_min: int | None = None
    step_max: int | None = None
    task: str = ""
    origin: str = ""
    group: str = ""
    success: str = ""  # "1" / "0" / ""
    error: str = ""  # "1": only episodes that failed to run (or bad lines), "0": none of them
    guided: str = ""
    q: str = ""
    sort: str = "line"
    desc: bool = False
    page: int = 1
    per_page: int = PER_PAGE

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> ListQuery:
        def text(key: str) -> str:
            return str(params.get(key, "")).strip()[:500]

        def integer(key: str, default: int | None = None) -> int | None:
            try:
                value = int(text(key))
            except ValueError:
                return default
            return check_int64(value, f"?{key}=")

        sort = text("sort")
        return cls(split=text("split"), step_min=integer("step_min"), step_max=integer("step_max"),
                   task=text("task"), origin=text("origin"), group=text("group"),
                   success=text("success") if text("success") in ("0", "1") else "",
                   error=text("error") if text("error") in ("0", "1") else "",
                   guided=text("guided") if text("guided") in ("0", "1") else "",
                   q=text("q"), sort=sort if sort in SORTS else "line", desc=text("desc") == "1",
                   page=min(MAX_PAGE, max(1, integer("page", 1) or 1)),
                   per_page=min(MAX_PER_PAGE, max(1, integer("per_page", PER_PAGE) or PER_PAGE)))

    def params(self, **changes: Any) -> dict[str, str]:
        """This query as URL parameters (defaults left out), with `changes` applied."""
        values = attrs.asdict(attrs.evolve(self, **changes))
        defaults = attrs.asdict(ListQuery())
        out = {}
        for key, value in values.items():
            if value != defaults[key] and value not in (None, ""):
                out[key] = "1" if value is True else str(value)
        return out


def fts_query(text: str) -> str:
    """User text as an FTS5 query: every word must occur (quoted, so no operator syntax leaks in)."""
    return " AND ".join(f'"{word}"' for word in TOKEN.findall(text))


def where_clause(query: ListQuery, index: EpisodeIndex) -> tuple[str, list[Any]]:
    conditions: list[str] = []
    params: list[Any] = []
    for column, value in (("split", query.split), ("task_id", query.task), ("origin", query.origin),
                          ("grp", query.group)):
        if value:
            conditions.append(f"{column} = ?")
            params.append(value)
    if query.step_min is not None:
        conditions.append("step >= ?")
        params.append(query.step_min)
    if query.step_max is not None:
        conditions.append("step <= ?")
        params.append(query.step_max)
    if query.success:
        conditions.append("success = ?")
        params.append(int(query.success))
    if query.guided:
        conditions.append("guided = ?")
        params.append(int(query.guided))
    if query.error == "1":
        conditions.append("(error IS NOT NULL OR bad IS NOT NULL)")
    elif query.error == "0":
        conditions.append("(error IS NULL AND bad IS NULL)")
    if query.q:
        if index.fts:
            match = fts_query(query.q)
            if match:
                conditions.append("id IN (SELECT rowid FROM search WHERE search MATCH ?)")
                params.append(match)
        else:
            conditions.append("id IN (SELECT rowid FROM search WHERE text LIKE ?)")
            params.append(f"%{query.q}%")
    return (" WHERE " + " AND ".join(conditions)) if conditions else "", params


def list_episodes(index: EpisodeIndex, query: ListQuery) -> tuple[list[dict[str, Any]], int]:
    """One page of rows (dicts of LIST_COLUMNS) and the number of rows matching the filters."""
    where, params = where_clause(query, index)
    total = index.query(f"SELECT count(*) FROM episodes{where}", tuple(params))[0][0]
    direction = "DESC" if query.desc else "ASC"
    order = f"{SORTS[query.sort]} {direction}, id {direction}" if query.sort != "line" else f"id {direction}"
    rows = index.query(f"SELECT {', '.join(LIST_COLUMNS)} FROM episodes{where} ORDER BY {order} LIMIT ? OFFSET ?",
                       (*params, query.per_page, (query.page - 1) * query.per_page))
    return [dict(zip(LIST_COLUMNS, row, strict=True)) for row in rows], total


def group_rows(index: EpisodeIndex, step: int, split: str, group: str,
               limit: int = MAX_GROUP_SHOWN + 1) -> list[dict[str, Any]]:
    """The episodes of one group (at most `limit`: a page shows MAX_GROUP_SHOWN and says there are more)."""
    rows = index.query(f"SELECT {', '.join(LIST_COLUMNS)} FROM episodes WHERE step = ? AND split = ? AND grp = ? "
                       "ORDER BY idx, id LIMIT ?", (step, split, group, limit))
    return [dict(zip(LIST_COLUMNS, row, strict=True)) for row in rows]


def choices(index: EpisodeIndex) -> dict[str, list[Any]]:
    """The values the filter drop-downs offer (computed once per change of the index)."""
    def compute() -> dict[str, list[Any]]:
        return {column: [row[0] for row in index.query(
                    f"SELECT DISTINCT {column} FROM episodes WHERE {column} IS NOT NULL ORDER BY {column}")]
                for column in ("split", "origin")}

    return index.memo("choices", compute)


def summary(index: EpisodeIndex) -> dict[str, Any]:
    """Counts over the whole run (computed once per change of the index)."""
    def compute() -> tuple[Any, ...]:
        count, first, last = index.query("SELECT count(*), min(step), max(step) FROM episodes")[0]
        bad = index.query("SELECT count(*) FROM episodes WHERE bad IS NOT NULL")[0][0]
        return count, bad, first, last

    count, bad, first, last = index.memo("summary", compute)
    return {"episodes": count, "bad_lines": bad, "first_step": first, "last_step": last,
            "torn_bytes": index.torn_bytes, "fts": index.fts, "problem": index.problem}
