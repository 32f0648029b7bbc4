"""The two models the token tests run with, loaded once per test session.

`tiny`: ChatML without a default system prompt, a word-level tokenizer, a pad token of its own.
`smollm2` (SmolLM2-135M-Instruct, the real model): ChatML whose template injects a default
system prompt when a conversation has none, `pad == eos == <|im_end|>`, a 49,152-token BPE
vocabulary, 30 layers. Tokenizer-only tests take both freely (conftest's `tokenizer`); a test
that runs the real model asks for it with `@both_models` and keeps to a few short turns (135M
parameters in float32 on a CPU).
"""

from __future__ import annotations

import functools
from typing import Any

import pytest

MODELS = ("tiny", "smollm2")

# `policy` is the tiny model unless a test is marked with this.
both_models = pytest.mark.parametrize("policy", MODELS, indirect=True)


def model_path(name: str) -> str:
    """Where `name` loads from; the real model is fetched once into the user's cache (testing.py)."""
    if name == "tiny":
        return "tiny"
    from beyondagent_plugin_torch.testing import real_model_dir

    return str(real_model_dir())


@functools.cache
def loaded_tokenizer(name: str) -> Any:
    from beyondagent_plugin_torch.models import load_tokenizer

    return load_tokenizer(model_path(name))


@functools.cache
def loaded_policy(name: str) -> tuple[Any, Any]:
    """(model, tokenizer) in float32, eval mode; shared, so tests must not train it."""
    from beyondagent_plugin_torch.models import load_policy

    return load_policy(model_path(name), dtype="float32")
