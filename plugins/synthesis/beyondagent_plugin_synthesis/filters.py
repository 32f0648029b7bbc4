"""Task filters `dedup` and `min_confidence`: drop near-duplicate and unsure synthetic tasks.

`dedup` compares each candidate's query with the tasks kept so far (the whole set, or only
those of the same seed task with `scope: seed`) and with the candidates it already let
through in this call, and drops it when the similarity reaches `threshold` (at or above it:
at 1.0, exact duplicates after normalization are dropped by every method and metric). Queries are
normalized first (Unicode NFKC, case folded, punctuation dropped, whitespace collapsed) and
compared as sets (Jaccard) or counts (cosine) of character `n`-grams, which works for any
script, Chinese and Japanese included, where word splitting on spaces does not. With
`method: embeddings` a sentence-transformers model compares meanings instead (the package
is imported only then; a clear error names it when it is missing). Two tasks that both carry
an env-checkable goal (`metadata["goal"]`, as hindsight tasks do) are compared by what they
ask instead: duplicates exactly when their metadata (the start and the goal) are equal, since
"reach row 0, column 1" and "reach row 0, column 2" differ in one character but not in kind.

`min_confidence` drops tasks whose summarizer confidence is below `threshold`; tasks with
no confidence are kept or dropped as `missing` says.
"""

from __future__ import annotations

import importlib.util
import json
import math
import unicodedata
from collections import Counter
from collections.abc import Sequence
from typing import Any

import attrs

from beyondagent_core.checks import FRACTION_WHY, number
from beyondagent_core.errors import SpecError
from beyondagent_core.logs import get_logger
from beyondagent_core.types import Task

log = get_logger("beyondagent.filters")


def _one_of(*choices: str) -> Any:
    def check(instance: Any, attribute: attrs.Attribute, value: str) -> None:
        if value not in choices:
            raise ValueError(f"{attribute.name} must be one of {', '.join(choices)}, got {value!r}")

    return check


_fraction = number(ge=0, le=1, why=FRACTION_WHY)
_ngram = number(ge=1, le=64, why="meaning: character n-grams longer than a sentence match nothing")


# --- dedup -----------------------------------------------------------------------------------


@attrs.define
class DedupConfig:
    """`threshold`: a similarity at or above it makes a duplicate. `method`: `ngram` (character
    `n`-grams compared by `metric`, `jaccard` or `cosine`) or `embeddings` (cosine similarity of
    the sentence-transformers `model`, a name or a local path). `scope`: `all` compares with
    every kept task, `seed` only with tasks of the same seed task (for tasks whose wording
    repeats across seeds but whose start differs). `compare_goals`: two tasks that both have a
    `metadata["goal"]` are duplicates only when their metadata (start and goal) are equal, and
    their wording is not compared.
    """

    threshold: float = attrs.field(default=0.8, validator=_fraction)
    method: str = attrs.field(default="ngram", validator=_one_of("ngram", "embeddings"))
    n: int = attrs.field(default=3, validator=_ngram)
    metric: str = attrs.field(default="jaccard", validator=_one_of("jaccard", "cosine"))
    scope: str = attrs.field(default="all", validator=_one_of("all", "seed"))
    compare_goals: bool = True
    model: str | None = None


def normalize(text: str) -> str:
    """NFKC, case folded, punctuation dropped and whitespace collapsed: what `dedup` compares."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = "".join(" " if unicodedata.category(ch).startswith("P") else ch for ch in text)
    return " ".join(text.split())


def char_ngrams(text: str, n: int) -> Counter[str]:
    """The character `n`-grams of `text` with their counts (a text shorter than `n` is one gram)."""
    if len(text) <= n:
        return Counter([text]) if text else Counter()
    return Counter(text[i: i + n] for i in range(len(text) - n + 1))


def jaccard(a: Counter[str], b: Counter[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a.keys() & b.keys()) / len(a.keys() | b.keys())


def cosine(a: Counter[str], b: Counter[str]) -> float:
    if a == b:  # exactly 1: the float sums below land a hair under it, and `threshold: 1.0` must match
        return 1.0
    norm = math.sqrt(sum(v * v for v in a.values())) * math.sqrt(sum(v * v for v in b.values()))
    if norm == 0:
        return 1.0 if not a and not b else 0.0
    return sum(count * b[gram] for gram, count in a.items()) / norm


class Dedup:
    """The `TaskFilter` protocol; `stats` counts kept and dropped candidates."""

    def __init__(self, config: DedupConfig | None = None):
        self.config = config or DedupConfig()
        self.stats: Counter[str] = Counter()
        self._grams: dict[str, Counter[str]] = {}
        self._goal_keys: dict[int, str | None] = {}
        self._encoder: _Embeddings | None = None
        if self.config.method == "embeddings":
            self._encoder = _Embeddings(self.config.model)

    async def keep(self, candidates: Sequence[Task], kept: Sequence[Task]) -> list[Task]:
        if self._encoder is not None:
            import asyncio  # here: this module is imported at start-up, where asyncio is not needed

            # Encoding is slow, blocking work: run it off the event loop.
            return await asyncio.to_thread(self._keep, candidates, kept)
        return self._keep(candidates, kept)

    def _keep(self, candidates: Sequence[Task], kept: Sequence[Task]) -> list[Task]:
        self._goal_keys = {}  # by id(task), valid for this call only (the tasks stay alive meanwhile)
        pool = [task for task in kept if task.query or self._goal_of(task) is not None]
        accepted: list[Task] = []
        for task in candidates:
            same_scope = [t for t in pool if self.config.scope == "all" or t.seed_task_id == task.seed_task_id]
            duplicate_of = self._duplicate_of(task, same_scope)
            if duplicate_of is not None:
                self.stats["dropped"] += 1
                log.debug("dedup.dropped", task=task.task_id, query=task.query, duplicate_of=duplicate_of.task_id)
                continue
            accepted.append(task)
            pool.append(task)
        self.stats["kept"] += len(accepted)
        return accepted

    def _duplicate_of(self, task: Task, others: list[Task]) -> Task | None:
        goal = self._goal_of(task)
        if goal is not None:
            for other in others:
                if self._goal_of(other) == goal:
                    return other
            others = [other for other in others if self._goal_of(other) is None]
        if not task.query:  # nothing to compare: a filter on wording has no say
            return None
        others = [other for other in others if other.query]
        index = self._similar_to(task.query, [other.query for other in others])  # type: ignore[misc]
        return None if index is None else others[index]

    def _goal_of(self, task: Task) -> str | None:
        """The canonical metadata of a task with a goal (start and goal), when goals are compared."""
        if id(task) not in self._goal_keys:
            key = None
            if self.config.compare_goals and isinstance(task.metadata, dict) and "goal" in task.metadata:
                try:
                    key = json.dumps(task.metadata, sort_keys=True, ensure_ascii=False)
                except (TypeError, ValueError):
                    key = None
            self._goal_keys[id(task)] = key
        return self._goal_keys[id(task)]

    def similarity(self, a: str, b: str) -> float:
        """How alike two queries are, from 0 to 1, by this filter's method."""
        if self._encoder is not None:
            return self._encoder.similarities(a, [b])[0]
        measure = jaccard if self.config.metric == "jaccard" else cosine
        return measure(self._ngrams(a), self._ngrams(b))

    def _similar_to(self, query: str, others: list[str]) -> int | None:
        """The index of the first of `others` at least `threshold` similar to `query`."""
        if not others:
            return None
        if self._encoder is not None:
            scores = self._encoder.similarities(query, others)
        else:
            measure = jaccard if self.config.metric == "jaccard" else cosine
            grams = self._ngrams(query)
            scores = [measure(grams, self._ngrams(other)) for other in others]
        return next((index for index, score in enumerate(scores) if score >= self.config.threshold), None)

    def _ngrams(self, query: str) -> Counter[str]:
        grams = self._grams.get(query)
        if grams is None:
            grams = self._grams[query] = char_ngrams(normalize(query), self.config.n)
        return grams


class _Embeddings:
    """Sentence embeddings from `sentence-transformers`, imported only when `method: embeddings` is chosen."""

    def __init__(self, model: str | None):
        where = "explore.filters (dedup), key method"
        if not model:
            raise SpecError("dedup with method: embeddings needs a model", where=where,
                            hint="set model to a sentence-transformers model name or a local path")
        if importlib.util.find_spec("sentence_transformers") is None:
            raise SpecError("dedup with method: embeddings needs the package sentence-transformers, "
                            "which is not installed", where=where,
                            hint="pip install sentence-transformers, or use method: ngram")
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(model)
        self._cache: dict[str, Any] = {}

    def similarities(self, query: str, others: list[str]) -> list[float]:
        missing = [text for text in dict.fromkeys([query, *others]) if text not in self._cache]
        if missing:
            vectors = self.model.encode([normalize(t) for t in missing], normalize_embeddings=True)
            self._cache.update(zip(missing, vectors, strict=True))
        target, same = self._cache[query], normalize(query)
        # the same text is similarity 1 exactly (float32 vectors give 0.99999994, under `threshold: 1.0`)
        return [1.0 if normalize(other) == same else float(target @ self._cache[other]) for other in others]


# --- min_confidence ---------------------------------------------------------------------------


@attrs.define
class MinConfidenceConfig:
    """`threshold`: the lowest confidence kept. `missing`: `keep` or `drop` tasks that carry no
    confidence (a summarizer that does not score its tasks)."""

    threshold: float = attrs.field(default=0.5, validator=_fraction)
    missing: str = attrs.field(default="keep", validator=_one_of("keep", "drop"))


class MinConfidence:
    """The `TaskFilter` protocol; `stats` counts kept and dropped candidates."""

    independent = True  # judges each task alone: the engine runs it outside its commit lock

    def __init__(self, config: MinConfidenceConfig | None = None):
        self.config = config or MinConfidenceConfig()
        self.stats: Counter[str] = Counter()

    async def keep(self, candidates: Sequence[Task], kept: Sequence[Task]) -> list[Task]:
        accepted = [task for task in candidates if self._sure_enough(task)]
        self.stats["kept"] += len(accepted)
        self.stats["dropped"] += len(candidates) - len(accepted)
        return accepted

    def _sure_enough(self, task: Task) -> bool:
        if task.confidence is None:
            return self.config.missing == "keep"
        return task.confidence >= self.config.threshold
