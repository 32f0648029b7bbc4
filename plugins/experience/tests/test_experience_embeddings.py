"""The `experience` store with embeddings: a real `/v1/embeddings` on loopback, vectors in sqlite-vec.

`embedding_server` (conftest) serves hashed bag-of-words vectors to the real `openai` client,
so texts sharing words are close and every request is real HTTP.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from beyondagent_plugin_experience.config import EmbeddingConfig, ExperienceStoreConfig
from beyondagent_plugin_experience.store import SqliteExperienceStore
from experience_embedding_server import EmbeddingServer, bag_of_words, cosine

from beyondagent_core.errors import RunError, SpecError
from beyondagent_core.experience import Experience
from beyondagent_core.registry import Registry
from beyondagent_core.spec import select_component
from beyondagent_core.testing.experience_contract import ExperienceStoreContract
from beyondagent_core.types import Task

pytestmark = pytest.mark.beyondagent_plugins("experience")

LESSONS = [
    Experience(text="Pick up the passenger at the blue stop before driving to the hotel.", task_id="taxi",
               query="drive the taxi"),
    Experience(text="Walk around the holes of the frozen lake; the goal is in the far corner.", task_id="lake",
               query="cross the frozen lake"),
    Experience(text="The hotel entrance faces the river; park the taxi on the river side.", task_id="hotel",
               query="park at the hotel"),
]


def store_at(path: Path, server: EmbeddingServer, **embedding: Any) -> SqliteExperienceStore:
    settings = {"model": "bow-64", "base_url": server.base_url, "backoff_base": 0.0, **embedding}
    return SqliteExperienceStore(ExperienceStoreConfig(embedding=EmbeddingConfig(**settings)), path=path)


class TestEmbeddingStoreContract(ExperienceStoreContract):
    @pytest.fixture
    def implementation(self, tmp_path: Path, embedding_server: EmbeddingServer) -> dict[str, Any]:
        return {"name": "experience", "path": str(tmp_path / "lessons.sqlite"),
                "embedding": {"model": "bow", "base_url": embedding_server.base_url}}


def test_retrieval_follows_cosine_similarity(tmp_path: Path, embedding_server: EmbeddingServer) -> None:
    store = store_at(tmp_path / "x.sqlite", embedding_server)
    assert store.add(LESSONS) == 3
    query = "drive the taxi to the hotel by the river"
    found = store.retrieve(Task(task_id="new", query=query), 3)
    expected = sorted(LESSONS, key=lambda e: -cosine(bag_of_words(query, 64),
                                                      bag_of_words(f"{e.query}\n{e.text}", 64)))
    assert [e.task_id for e in found] == [e.task_id for e in expected] == ["hotel", "taxi", "lake"]
    assert store.retrieve(Task(task_id="new", query=query), 1)[0].task_id == "hotel"
    assert embedding_server.texts().count(query) == 1  # the query's vector is cached
    assert embedding_server.requests[0]["encoding_format"] == "float"
    stats = store.stats()
    assert stats["embedding_requests"] == 2 and stats["embedding_texts"] == 4 and stats["retrieval_hits"] == 2


def test_min_similarity_leaves_unrelated_records_out(tmp_path: Path, embedding_server: EmbeddingServer) -> None:
    store = store_at(tmp_path / "x.sqlite", embedding_server, min_similarity=0.2)
    store.add(LESSONS)
    found = store.retrieve(Task(task_id="lake", query="frozen lake holes"), 3)
    assert [e.task_id for e in found] == ["lake"]


def test_hybrid_fuses_vector_and_bm25_rankings(tmp_path: Path, embedding_server: EmbeddingServer) -> None:
    query = Task(task_id="new", query="the frozen lake")
    vector = store_at(tmp_path / "x.sqlite", embedding_server, min_similarity=0.99)
    vector.add(LESSONS)
    assert vector.retrieve(query, 2) == []  # no vector is that close
    vector.close()
    hybrid = store_at(tmp_path / "x.sqlite", embedding_server, min_similarity=0.99, ranking="hybrid")
    assert [e.task_id for e in hybrid.retrieve(query, 2)] == ["lake"]  # BM25's ranking takes part
    hybrid.close()
    both = store_at(tmp_path / "x.sqlite", embedding_server, model="bow", ranking="hybrid")
    found = both.retrieve(Task(task_id="new", query="drive the taxi to the hotel by the river"), 3)
    assert [e.task_id for e in found][:2] in (["hotel", "taxi"], ["taxi", "hotel"])


def test_batches_follow_batch_size(tmp_path: Path, embedding_server: EmbeddingServer) -> None:
    store = store_at(tmp_path / "x.sqlite", embedding_server, batch_size=2)
    many = [Experience(text=f"lesson number {i} about topic {i * 7}", task_id=str(i)) for i in range(5)]
    assert store.add(many) == 5
    assert [len(body["input"]) for body in embedding_server.requests] == [2, 2, 1]


def test_vectors_persist_across_reopen(tmp_path: Path, embedding_server: EmbeddingServer) -> None:
    first = store_at(tmp_path / "x.sqlite", embedding_server)
    first.add(LESSONS)
    first.close()
    embedded = len(embedding_server.texts())
    second = store_at(tmp_path / "x.sqlite", embedding_server)
    found = second.retrieve(Task(task_id="new", query="frozen lake"), 1)
    assert [e.task_id for e in found] == ["lake"]
    assert embedding_server.texts()[embedded:] == ["frozen lake"]  # only the query: no record re-embedded
    assert second.stats()["reembedded"] == 0


def test_another_model_is_refused_with_what_to_do(tmp_path: Path, embedding_server: EmbeddingServer) -> None:
    first = store_at(tmp_path / "x.sqlite", embedding_server)
    first.add(LESSONS)
    first.close()
    other = store_at(tmp_path / "x.sqlite", embedding_server, model="bow-32", on_model_change="refuse")
    with pytest.raises(RunError, match="holds vectors of the embedding model 'bow-64|native'") as caught:
        other.retrieve(Task(task_id="new", query="frozen lake"), 1)
    assert caught.value.where == "experience.embedding.model" and "on_model_change: reembed" in caught.value.hint
    with pytest.raises(RunError, match="holds vectors of the embedding model"):  # and again: never half open
        other.add(LESSONS)
    assert len(embedding_server.requests) == 1


def test_a_damaged_file_is_a_clear_error_with_embeddings(tmp_path: Path, embedding_server: EmbeddingServer) -> None:
    path = tmp_path / "x.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(RunError, match="cannot be opened") as caught:
        store_at(path, embedding_server).add(LESSONS)
    assert caught.value.where == "experience.path"


def test_another_model_reembeds_every_record(tmp_path: Path, embedding_server: EmbeddingServer) -> None:
    first = store_at(tmp_path / "x.sqlite", embedding_server)
    first.add(LESSONS)
    first.close()
    other = store_at(tmp_path / "x.sqlite", embedding_server, model="bow-32")
    assert [e.task_id for e in other.retrieve(Task(task_id="new", query="frozen lake"), 1)] == ["lake"]
    assert other.stats()["reembedded"] == 3
    assert [body["model"] for body in embedding_server.requests] == ["bow-64", "bow-32", "bow-32"]
    other.close()
    again = store_at(tmp_path / "x.sqlite", embedding_server, model="bow-32")
    again.retrieve(Task(task_id="new", query="frozen lake"), 1)  # the query is all it embeds now
    assert again.stats()["reembedded"] == 0 and again.stats()["embedding_texts"] == 1


def test_near_duplicates_are_counted_not_added(tmp_path: Path, embedding_server: EmbeddingServer) -> None:
    store = store_at(tmp_path / "x.sqlite", embedding_server)
    assert store.add(LESSONS[:1]) == 1
    repeats = [Experience(text=LESSONS[0].text.upper() + "  ", query=LESSONS[0].query),  # the same id
               Experience(text="Pick up the passenger, at the blue stop; before driving to the hotel!",
                          query=LESSONS[0].query),  # the same words: normalized text
               Experience(text="Before driving to the hotel, pick up the passenger at the blue stop.",
                          query=LESSONS[0].query),  # reordered: cosine 1.0
               Experience(text="Before driving to the hotel, pick up the passenger at the blue stop.",
                          query=LESSONS[0].query),  # and within the batch
               Experience(text="Drop off the passenger at the hotel.", query=LESSONS[0].query)]
    assert store.add(repeats) == 1
    stats = store.stats()
    assert (stats["total"], stats["added"], stats["duplicates"], stats["near_duplicates"]) == (2, 2, 4, 2)


def test_dedup_threshold_is_a_setting(tmp_path: Path, embedding_server: EmbeddingServer) -> None:
    loose = store_at(tmp_path / "x.sqlite", embedding_server, dedup_similarity=0.5)
    loose.add(LESSONS[:1])
    similar = Experience(text="Pick up the passenger at the red stop before driving.", query="drive the taxi")
    assert loose.add([similar]) == 0 and loose.stats()["near_duplicates"] == 1
    strict = store_at(tmp_path / "y.sqlite", embedding_server)
    strict.add(LESSONS[:1])
    assert strict.add([similar]) == 1


def test_without_embeddings_normalized_text_is_the_rule(tmp_path: Path) -> None:
    store = SqliteExperienceStore(path=tmp_path / "x.sqlite")
    assert store.add([Experience(text="Move down first."), Experience(text="move down, FIRST!"),
                      Experience(text="Move down first, then right.")]) == 2
    assert store.stats()["near_duplicates"] == 1 and store.stats()["duplicates"] == 1


def test_a_5xx_is_retried(tmp_path: Path, embedding_server: EmbeddingServer) -> None:
    embedding_server.faults = [500, 503]
    store = store_at(tmp_path / "x.sqlite", embedding_server)
    assert store.add(LESSONS) == 3
    assert len(embedding_server.requests) == 3 and store.stats()["embedding_retries"] == 2
    assert store.retrieve(Task(task_id="new", query="frozen lake"), 1)[0].task_id == "lake"


def test_a_401_is_a_clear_error_naming_the_endpoint(tmp_path: Path) -> None:
    with EmbeddingServer(api_key="the-right-key") as server:
        store = store_at(tmp_path / "x.sqlite", server, api_key_env="BEYONDAGENT_TEST_UNSET_KEY")
        with pytest.raises(RunError, match="was refused: HTTP 401: Incorrect API key") as caught:
            store.add(LESSONS)
    assert f"{server.base_url}/embeddings (model bow-64)" in caught.value.message
    assert "BEYONDAGENT_TEST_UNSET_KEY" in caught.value.hint and caught.value.where == "experience.embedding"
    assert len(server.requests) == 1  # not retried


def test_an_endpoint_down_for_good_falls_back_to_bm25(tmp_path: Path, embedding_server: EmbeddingServer) -> None:
    store = store_at(tmp_path / "x.sqlite", embedding_server, max_retries=1)
    embedding_server.faults = [500] * 4
    assert store.add(LESSONS) == 3  # kept without vectors
    found = store.retrieve(Task(task_id="new", query="cross the frozen lake"), 1)  # BM25 answers
    assert [e.task_id for e in found] == ["lake"] and store.stats()["embedding_failures"] == 2
    embedding_server.faults = []
    found = store.retrieve(Task(task_id="new", query="park the taxi at the hotel"), 1)  # back: vectors made
    assert [e.task_id for e in found] == ["hotel"] and store.stats()["embedding_failures"] == 2
    assert [body["input"] for body in embedding_server.requests[-2:]] == [
        [f"{e.query}\n{e.text}" for e in LESSONS], ["park the taxi at the hotel"]]


def test_records_of_a_bm25_run_get_vectors_and_the_file_stays_readable_without(
        tmp_path: Path, embedding_server: EmbeddingServer) -> None:
    plain = SqliteExperienceStore(path=tmp_path / "x.sqlite")
    plain.add(LESSONS[:2])
    plain.close()
    embedded = store_at(tmp_path / "x.sqlite", embedding_server)
    embedded.add(LESSONS[2:])
    assert [e.task_id for e in embedded.retrieve(Task(task_id="n", query="walk around the holes"), 1)] == ["lake"]
    assert len(embedding_server.texts()) == 4  # two backfilled, one added, one query
    embedded.close()
    again = SqliteExperienceStore(path=tmp_path / "x.sqlite")  # the stdlib sqlite3, no vec0 module
    assert again.add([Experience(text="A fourth lesson.")]) == 1
    assert [e.task_id for e in again.retrieve(Task(task_id="n", query="frozen lake"), 1)] == ["lake"]


def test_settings_are_checked_with_their_key_path(plugin_manager: Any) -> None:
    registry = Registry(plugin_manager)
    for block, key in (({"base_url": "http://x"}, "experience.embedding.model"),
                       ({"model": "m", "ranking": "dense"}, "experience.embedding.ranking"),
                       ({"model": "m", "dedup_similarity": 1.5}, "experience.embedding.dedup_similarity"),
                       ({"model": "m", "batch_size": 0}, "experience.embedding.batch_size")):
        with pytest.raises(SpecError, match=key.replace(".", r"\.")):
            select_component(registry, "experience_store", {"name": "experience", "embedding": block},
                             key_path="experience")


def test_a_missing_sqlite_vec_says_what_to_install(tmp_path: Path, embedding_server: EmbeddingServer) -> None:
    script = f"""
import sys
sys.modules["sqlite_vec"] = None  # as if the package were not installed
from beyondagent_plugin_experience.config import EmbeddingConfig, ExperienceStoreConfig
from beyondagent_plugin_experience.store import SqliteExperienceStore
from beyondagent_core.errors import RunError
from beyondagent_core.experience import Experience
config = ExperienceStoreConfig(embedding=EmbeddingConfig(model="bow", base_url={embedding_server.base_url!r}))
try:
    SqliteExperienceStore(config, path={str(tmp_path / "x.sqlite")!r}).add([Experience(text="a")])
except RunError as exc:
    print(exc)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120).stdout
    assert "needs the sqlite-vec package" in out and "[embeddings]" in out and "unset experience.embedding" in out


def test_records_another_store_adds_are_found(tmp_path: Path, embedding_server: EmbeddingServer) -> None:
    reader = store_at(tmp_path / "x.sqlite", embedding_server)
    writer = store_at(tmp_path / "x.sqlite", embedding_server)
    reader.add(LESSONS[:1])
    assert reader.retrieve(Task(task_id="n", query="frozen lake"), 1)[0].task_id == "taxi"  # the only one yet
    writer.add(LESSONS[1:2])
    assert reader.retrieve(Task(task_id="n", query="frozen lake"), 1)[0].task_id == "lake"
    assert reader.stats()["embedding_texts"] == 2  # its record and the query: the writer's vector is reused
