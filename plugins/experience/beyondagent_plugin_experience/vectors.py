"""The vector index: one `vec0` table (sqlite-vec) in the store's own sqlite file.

The table maps an experience id to the unit vector of its document (`lexical.document`) and
answers k-nearest-neighbour queries by cosine distance. A table `experience_meta` records which
model made the vectors (`Embedder.identity`) and their size: a store opened with another model
re-embeds every record or refuses (`on_model_change`), so vectors of two models never mix. Records
without a vector (added by a run without embeddings) are embedded when the index opens.

Loading the extension needs a `sqlite3` module built with extension loading; Python builds
without it (pyenv's default) use `pysqlite3` (the `pysqlite3-binary` wheel) instead.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from beyondagent_core.errors import RunError
from beyondagent_core.logs import get_logger
from beyondagent_plugin_experience.config import EmbeddingConfig
from beyondagent_plugin_experience.embeddings import Embedder

log = get_logger("beyondagent.experience")

TABLE = "experience_vectors"
META = "CREATE TABLE IF NOT EXISTS experience_meta (key TEXT PRIMARY KEY, value TEXT)"
INSTALL = ("pip install 'beyondagent-plugin-experience[embeddings]' (sqlite-vec, and pysqlite3-binary "
           "where Python's sqlite3 cannot load extensions), or unset experience.embedding to retrieve with BM25")


def connect(path: Path, *, timeout: float) -> tuple[Any, ModuleType]:
    """A connection to `path` with sqlite-vec loaded, and the DB-API module it came from; `timeout`:
    seconds a statement waits for another connection's lock."""
    try:
        import sqlite_vec
    except ImportError:
        raise RunError("experience.embedding needs the sqlite-vec package, which is not installed",
                       where="experience.embedding", hint=INSTALL) from None
    dbapi = _extension_capable_sqlite()
    try:
        db = dbapi.connect(str(path), timeout=timeout, check_same_thread=False)
    except dbapi.Error as exc:  # a directory, a folder without write permission
        raise RunError(f"the experience store {path} cannot be opened: {exc}", where="experience.path",
                       hint="point experience.path at a new file, or remove the damaged one") from exc
    try:
        db.enable_load_extension(True)
        sqlite_vec.load(db)
        db.enable_load_extension(False)
    except dbapi.OperationalError as exc:  # a damaged file is the caller's DatabaseError, later
        db.close()
        raise RunError(f"the sqlite-vec extension cannot be loaded into SQLite {dbapi.sqlite_version} "
                       f"({dbapi.__name__}): {exc}", where="experience.embedding", hint=INSTALL) from exc
    return db, dbapi


def _extension_capable_sqlite() -> ModuleType:
    if hasattr(sqlite3.Connection, "enable_load_extension"):
        return sqlite3
    try:
        from pysqlite3 import dbapi2
    except ImportError:
        raise RunError("this Python's sqlite3 module cannot load extensions (it was built without "
                       "--enable-loadable-sqlite-extensions), and sqlite-vec is one",
                       where="experience.embedding", hint=INSTALL) from None
    return dbapi2


class VectorIndex:
    """The `vec0` table of one store's file, kept in step with its records and its model."""

    def __init__(self, db: Any, embedder: Embedder, config: EmbeddingConfig, path: Path):
        self.db, self.embedder, self.config, self.path = db, embedder, config, path
        self.db.execute(META)
        self.reembedded = 0

    def _meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM experience_meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def _set_meta(self, key: str, value: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO experience_meta (key, value) VALUES (?, ?)", (key, value))

    @property
    def dim(self) -> int | None:
        value = self._meta("embedding_dim")
        return int(value) if value else None

    def open(self, documents: dict[str, str]) -> None:
        """Check the stored vectors' model against ours, then embed the records that have no vector.

        `documents`: every record's id and document.
        """
        stored = self._meta("embedding_model")
        if stored is not None and stored != self.embedder.identity:
            if self.config.on_model_change == "refuse":
                model = stored.split("|")[0]
                raise RunError(
                    f"the experience store {self.path} holds vectors of the embedding model {stored!r}; "
                    f"experience.embedding asks for {self.embedder.identity!r} (model|dimensions), and vectors "
                    f"of two models cannot be compared", where="experience.embedding.model",
                    hint=f"set experience.embedding.model back to {model!r}, set experience.embedding."
                         f"on_model_change: reembed to re-embed its {len(documents)} records, or point "
                         f"experience.path at a new file")
            log.warning("experience.reembedding", path=str(self.path), stored=stored, model=self.embedder.identity,
                        records=len(documents))
            self.db.execute(f"DROP TABLE IF EXISTS {TABLE}")
            self.db.execute("DELETE FROM experience_meta WHERE key IN ('embedding_model', 'embedding_dim')")
            self.reembedded += len(documents)
        self.db.commit()
        self.backfill(documents)

    def backfill(self, documents: dict[str, str]) -> int:
        """Embed the records of `documents` that have no vector yet; how many were."""
        have = set()
        if self.dim is not None:
            have = {row[0] for row in self.db.execute(f"SELECT experience_id FROM {TABLE}")}
        missing = [key for key in documents if key not in have]
        if missing:
            self.put(missing, self.embedder.embed([documents[key] for key in missing]))
            self.db.commit()
        return len(missing)

    def put(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        """Store vectors (not committed: the caller commits with the records)."""
        if not len(ids):
            return
        dim = int(vectors.shape[1])
        if self.dim is None:
            self.db.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {TABLE} USING "
                            f"vec0(experience_id TEXT PRIMARY KEY, embedding float[{dim}] distance_metric=cosine)")
            self._set_meta("embedding_model", self.embedder.identity)
            self._set_meta("embedding_dim", str(dim))
        elif dim != self.dim:
            raise RunError(f"{self.embedder.endpoint} returned vectors of size {dim}; the store {self.path} "
                           f"holds vectors of size {self.dim} from the same model name",
                           where="experience.embedding.dimensions",
                           hint="the endpoint changed the model behind this name: set experience.embedding."
                                "dimensions to match, or point experience.path at a new file")
        self.db.executemany(f"INSERT OR REPLACE INTO {TABLE} (experience_id, embedding) VALUES (?, ?)",
                            [(key, vector.astype(np.float32).tobytes()) for key, vector in zip(ids, vectors)])

    def nearest(self, vector: np.ndarray, n: int) -> list[tuple[str, float]]:
        """Up to `n` (id, cosine similarity) pairs, most similar first."""
        if self.dim is None or n <= 0:
            return []
        rows = self.db.execute(f"SELECT experience_id, distance FROM {TABLE} WHERE embedding MATCH ? AND k = ? "
                               "ORDER BY distance", (vector.astype(np.float32).tobytes(), int(n))).fetchall()
        return [(key, 1.0 - float(distance)) for key, distance in rows]
