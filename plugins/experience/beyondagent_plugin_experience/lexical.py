"""Lexical matching: the BM25 ranking of records (`bm25s`) and the normalized text that dedup compares.

A record's document is its task query (for a task without one, the text of its start:
`task_text`) and its text. The BM25 index covers every record and is rebuilt when the store has
grown (records are never removed, so the count says when).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from beyondagent_core.experience import VOLATILE_METADATA, Experience
from beyondagent_core.types import Task

WORD = re.compile(r"[^\W_]+")


def normalized_key(text: str) -> str:
    """Case, punctuation and spacing removed: two lessons with this key equal are near-identical."""
    return " ".join(WORD.findall(text.lower()))


def task_text(task: Task) -> str:
    """What retrieval matches a task by: its query, or for a task that has none (the env poses it, as
    gym tasks do) its env and its start (the metadata's values but the volatile ones: a FrozenLake
    map's rows), so that tasks with similar starts find each other's records."""
    if task.query:
        return task.query
    parts = [task.env or ""]
    for key, value in sorted((task.metadata or {}).items()):
        if key not in VOLATILE_METADATA:
            parts += [key, *(map(str, value) if isinstance(value, (list, tuple)) else [str(value)])]
    return " ".join(part for part in parts if part) or task.task_id


def document(record: Experience) -> str:
    """What retrieval matches a task against: the query (or start) the lesson was learned on, then the lesson."""
    learned_on = record.query or (record.metadata or {}).get("task_text") or ""
    return f"{learned_on}\n{record.text}".strip()


class Bm25Ranking:
    """BM25 (`bm25s`, English stopwords) of a task's query over the records' documents."""

    def __init__(self) -> None:
        self._index: tuple[int, Any, list[str]] | None = None  # (row count, BM25 index, ids in index order)

    def rank(self, query: str, records: Sequence[Experience], n: int) -> list[str]:
        """The ids of up to `n` records with a positive score, best first."""
        import bm25s

        if not records or n <= 0:
            return []
        if self._index is None or self._index[0] != len(records):
            corpus = [document(record) for record in records]
            index = bm25s.BM25()
            index.index(bm25s.tokenize(corpus, stopwords="en", show_progress=False), show_progress=False)
            self._index = (len(records), index, [record.experience_id for record in records])
        _, index, ids = self._index
        tokens = bm25s.tokenize([query], stopwords="en", show_progress=False)
        if not tokens.vocab:
            return []
        found, scores = index.retrieve(tokens, k=min(n, len(ids)), show_progress=False)
        return [ids[int(i)] for i, score in zip(found[0], scores[0]) if score > 0]
