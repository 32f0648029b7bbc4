"""Fixtures of the gateway's tests: the tiny model's chat template (one per test module)."""

from __future__ import annotations

import pytest

from beyondagent_core.runtime.tokens import ChatTemplate


@pytest.fixture(scope="module")
def template() -> ChatTemplate:
    load_tokenizer = pytest.importorskip("beyondagent_plugin_torch.models").load_tokenizer
    return ChatTemplate(load_tokenizer("tiny"))
