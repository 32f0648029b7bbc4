"""Fixtures of the experience store's tests: `embedding_server`, an OpenAI-compatible `/v1/embeddings` on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from experience_embedding_server import EmbeddingServer


@pytest.fixture
def embedding_server() -> Iterator[EmbeddingServer]:
    with EmbeddingServer() as server:
        yield server
