"""The two models the token tests run with, loaded once per test session.

`tiny`: ChatML without a default system prompt, a word-level tokenizer, a pad token of its own.
`smollm2` (SmolLM2-135M-Instruct, the real model): ChatML whose template injects a default
system prompt when a conversation has none, `pad == eos == <|im_end|>`, a 49,152-token BPE
vocabulary, 30 layers. `tiny_eos`: tiny as a base checkpoint is set up, its eos (and pad) the
`<|endoftext|>` that is not its template's end-of-turn token `<|im_end|>` (Qwen2.5 base models): code
that confuses the two passes with the other two, whose turns end on their eos. Tokenizer-only tests
take all three freely (conftest's `tokenizer`); a test that runs the real model asks for it with
`@both_models` and keeps to a few short turns (135M parameters in float32 on a CPU).
"""

from __future__ import annotations

import atexit
import functools
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

MODELS = ("tiny", "smollm2", "tiny_eos")

ENDOFTEXT_ID = 0  # tiny's `<|endoftext|>`: its pad token, tiny_eos's eos

# `policy` is the tiny model unless a test is marked with this.
both_models = pytest.mark.parametrize("policy", MODELS, indirect=True)


def model_path(name: str) -> str:
    """Where `name` loads from; the real model is fetched once into the user's cache (testing.py)."""
    if name == "tiny":
        return "tiny"
    if name == "tiny_eos":
        return str(tiny_eos_dir())
    from beyondagent_plugin_torch.testing import real_model_dir

    return str(real_model_dir())


@functools.cache
def tiny_eos_dir() -> Path:
    """tiny's files with `<|endoftext|>` as eos and pad (tokenizer, model and generation configs), once a session."""
    from beyondagent_plugin_torch.tiny import tiny_model_dir

    directory = Path(tempfile.mkdtemp(prefix="tiny-eos-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)  # once the test session ends
    for source in tiny_model_dir().iterdir():
        shutil.copy(source, directory / source.name)
    tokenizer_config = json.loads((directory / "tokenizer_config.json").read_text())
    tokenizer_config.update(eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    (directory / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    for name in ("config.json", "generation_config.json"):
        config = json.loads((directory / name).read_text())
        config.update(eos_token_id=ENDOFTEXT_ID, pad_token_id=ENDOFTEXT_ID)
        (directory / name).write_text(json.dumps(config))
    return directory


@functools.cache
def loaded_tokenizer(name: str) -> Any:
    from beyondagent_plugin_torch.models import load_tokenizer

    return load_tokenizer(model_path(name))


@functools.cache
def loaded_policy(name: str) -> tuple[Any, Any]:
    """(model, tokenizer) in float32, eval mode; shared, so tests must not train it."""
    from beyondagent_plugin_torch.models import load_policy

    return load_policy(model_path(name), dtype="float32")
