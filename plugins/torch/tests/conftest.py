"""Fixtures of the torch backend's tests (the envs are in torch_test_envs.py, the two models the
token tests run with in tiny_and_real.py)."""

from __future__ import annotations

from typing import Any

import pytest
from tiny_and_real import MODELS, loaded_policy, loaded_tokenizer
from torch_test_envs import EnvsForTests


@pytest.fixture(params=MODELS)
def tokenizer(request: pytest.FixtureRequest) -> Any:
    """Each model's tokenizer in turn (tiny's, the real model's)."""
    return loaded_tokenizer(request.param)


@pytest.fixture
def policy(request: pytest.FixtureRequest) -> tuple[Any, Any]:
    """(model, tokenizer): `tiny`, or each model in turn under `@both_models`."""
    return loaded_policy(getattr(request, "param", "tiny"))


@pytest.fixture
def test_envs(register_plugin: Any) -> None:
    register_plugin(EnvsForTests(), name="torch-test-envs")
