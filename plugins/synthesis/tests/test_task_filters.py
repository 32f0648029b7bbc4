"""Task filters `dedup` (any script, within and across seeds) and `min_confidence`, and their registration."""

from __future__ import annotations

import asyncio
import importlib.util
import itertools

import numpy as np
import pytest

from beyondagent_core.errors import SpecError
from beyondagent_core.registry import Registry
from beyondagent_core.spec import select_component
from beyondagent_plugin_synthesis.filters import Dedup, DedupConfig, MinConfidence, MinConfidenceConfig, normalize
from beyondagent_core.types import Task

# the synthesis components come from this plugin (the plugin_manager fixture loads only what it names)
pytestmark = pytest.mark.beyondagent_plugins("synthesis")

_ids = itertools.count()


def task(query: str | None, seed: str = "s1", *, confidence: float | None = None, **metadata) -> Task:
    return Task(task_id=f"{seed}/syn-{next(_ids)}", query=query, origin="synthetic", seed_task_id=seed,
                confidence=confidence, metadata=metadata)


def keep(flt, candidates, kept=()) -> list[str | None]:
    return [t.query for t in asyncio.run(flt.keep(list(candidates), list(kept)))]


def test_normalization_unifies_forms_of_the_same_text() -> None:
    assert normalize("  Créer\tun  CAFÉ! ") == "créer un café"
    assert normalize("Cre\u0301er un cafe\u0301") == normalize("Créer un café")  # decomposed accents
    assert normalize("ﾌｧｲﾙを削除する。") == "ファイルを削除する"  # half-width katakana, ideographic full stop
    assert normalize("Straße") == normalize("STRASSE")
    assert normalize("ＡＢＣ１２３") == "abc123"  # full-width Latin letters and digits


@pytest.mark.parametrize(("first", "second"), [
    ("Reach row 2, column 3.", "reach row 2 column 3"),
    ("把文件移动到回收站", "把文件移动到回收站。"),
    ("ファイルを削除する", "ﾌｧｲﾙを削除する"),
    ("会議を明日の午後三時に予約してください", "会議を明日の午後三時に予約してください！"),
    ("Créer un café pour l'équipe", "Cre\u0301er un cafe\u0301 pour l’équipe"),
])
def test_near_duplicates_in_any_script_are_dropped(first: str, second: str) -> None:
    assert keep(Dedup(), [task(first), task(second)]) == [first]


@pytest.mark.parametrize(("first", "second"), [
    ("Reach row 2, column 3.", "Reach row 3, column 2."),
    ("把文件移动到回收站", "打开浏览器并搜索明天的天气"),
    ("ファイルを削除する", "メールを送信する"),
    ("Créer un café", "Supprimer le dossier des photos"),
])
def test_different_tasks_are_kept(first: str, second: str) -> None:
    assert keep(Dedup(), [task(first), task(second)]) == [first, second]


def test_the_threshold_decides() -> None:
    a, b = "会議を明日の午後三時に予約してください", "会議を明日の午後三時に予約して下さい"
    dedup = Dedup()
    similarity = dedup.similarity(a, b)
    assert 0.5 < similarity < 0.8
    assert keep(Dedup(DedupConfig(threshold=0.8)), [task(a), task(b)]) == [a, b]
    assert keep(Dedup(DedupConfig(threshold=0.6)), [task(a), task(b)]) == [a]
    assert Dedup(DedupConfig(metric="cosine")).similarity(a, b) > similarity  # counts weigh shared grams more


def test_across_seeds_and_within_a_seed() -> None:
    kept = [task("把文件移动到回收站", seed="s1")]
    again_elsewhere = task("把文件移动到回收站！", seed="s2")
    assert keep(Dedup(), [again_elsewhere], kept) == []
    assert keep(Dedup(DedupConfig(scope="seed")), [again_elsewhere], kept) == ["把文件移动到回收站！"]
    same_seed = task("把文件移动到回收站。", seed="s1")
    assert keep(Dedup(DedupConfig(scope="seed")), [same_seed], kept) == []


def test_tasks_with_goals_compare_by_goal_and_start_not_wording() -> None:
    def reach(col: int, seed: int = 1, query: str | None = None) -> Task:
        goal = {"kind": "reach", "row": 0, "col": col}
        return task(query or f"Reach row 0, column {col} of this map.", seed=f"s{seed}", seed_id=seed, goal=goal)

    # One character apart in wording (similarity ~0.9), different goals: both kept.
    assert len(keep(Dedup(), [reach(1), reach(2)])) == 2
    # The same goal from the same start, worded differently: a duplicate.
    assert len(keep(Dedup(), [reach(1), reach(1, query="Walk to the cell at row 0 and column 1.")])) == 1
    # The same goal from another start (another map): not a duplicate.
    assert len(keep(Dedup(), [reach(1, seed=1), reach(1, seed=2)])) == 2
    # compare_goals off: wording only.
    assert len(keep(Dedup(DedupConfig(compare_goals=False)), [reach(1), reach(2)])) == 1


def test_tasks_without_a_query_are_kept() -> None:
    assert keep(Dedup(), [task(None), task(None), task("")]) == [None, None, ""]


def test_stats_count_kept_and_dropped() -> None:
    dedup = Dedup()
    keep(dedup, [task("open the door"), task("Open the door."), task("close the window")])
    assert (dedup.stats["kept"], dedup.stats["dropped"]) == (2, 1)


LONG = "Go to the kitchen and find the red apple on the table, then bring it to the living room."


@pytest.mark.parametrize("metric", ["jaccard", "cosine"])
def test_threshold_one_drops_exact_duplicates(metric: str) -> None:
    # "at or above": cosine's float sums put a long text's similarity to itself at 0.9999999999999998
    dedup = Dedup(DedupConfig(threshold=1.0, metric=metric))
    assert dedup.similarity(LONG, LONG) == 1.0
    assert keep(dedup, [task(LONG), task(LONG.upper()), task(LONG + " Quickly.")]) == [LONG, LONG + " Quickly."]


class UnitVectors:
    """Stands in for a sentence-transformers model (no weights can be downloaded here): the same
    float32 unit vector for every text, whose dot product with itself is 0.99999994, not 1."""

    def encode(self, texts: list[str], normalize_embeddings: bool) -> np.ndarray:
        return np.full((len(texts), 384), 1 / np.sqrt(384), dtype=np.float32)


def test_threshold_one_drops_exact_duplicates_with_embeddings() -> None:
    from beyondagent_plugin_synthesis.filters import _Embeddings

    encoder = object.__new__(_Embeddings)
    encoder.model, encoder._cache = UnitVectors(), {}
    assert encoder.similarities(LONG, [LONG.lower(), "Another text."]) == [1.0, pytest.approx(1.0)]
    dedup = Dedup(DedupConfig(threshold=1.0))
    dedup._encoder = encoder  # as DedupConfig(method="embeddings", model=...) builds it
    assert keep(dedup, [task(LONG), task(LONG.lower())]) == [LONG]


def test_embeddings_need_sentence_transformers_and_a_model() -> None:
    with pytest.raises(SpecError, match="needs a model"):
        Dedup(DedupConfig(method="embeddings"))
    if importlib.util.find_spec("sentence_transformers") is not None:
        pytest.skip("sentence-transformers is installed here; the missing-package message cannot be shown")
    with pytest.raises(SpecError, match="sentence-transformers") as error:
        Dedup(DedupConfig(method="embeddings", model="all-MiniLM-L6-v2"))
    assert "pip install sentence-transformers" in error.value.hint
    assert "method: ngram" in error.value.hint


@pytest.mark.parametrize("options", [{"threshold": 1.5}, {"method": "bm25"}, {"n": 0}, {"metric": "dice"},
                                     {"scope": "env"}])
def test_bad_dedup_options_are_value_errors(options) -> None:
    with pytest.raises(ValueError):
        DedupConfig(**options)


def test_min_confidence() -> None:
    candidates = [task("a", confidence=0.9), task("b", confidence=0.5), task("c", confidence=0.2), task("d")]
    assert keep(MinConfidence(), candidates) == ["a", "b", "d"]
    assert keep(MinConfidence(MinConfidenceConfig(threshold=0.6, missing="drop")), candidates) == ["a"]
    flt = MinConfidence(MinConfidenceConfig(threshold=0.0))
    assert keep(flt, candidates) == ["a", "b", "c", "d"]
    assert (flt.stats["kept"], flt.stats["dropped"]) == (4, 0)
    with pytest.raises(ValueError, match="missing must be one of keep, drop"):
        MinConfidenceConfig(missing="maybe")


@pytest.mark.parametrize(("block", "cls"), [
    ({"name": "dedup", "threshold": 0.7, "scope": "seed"}, Dedup),
    ({"name": "min_confidence", "threshold": 0.3}, MinConfidence),
])
def test_filters_are_registered_by_the_core(plugin_manager, block, cls) -> None:
    component = select_component(Registry(plugin_manager), "task_filter", dict(block), key_path="explore.filters[0]")
    built = component.create()
    assert isinstance(built, cls) and built.config.threshold == block["threshold"]


def test_a_bad_option_in_the_spec_is_a_spec_error(plugin_manager) -> None:
    with pytest.raises(SpecError, match="threshold"):
        select_component(Registry(plugin_manager), "task_filter", {"name": "dedup", "threshold": 2.0},
                         key_path="explore.filters[0]").create()
