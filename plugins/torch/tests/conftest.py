"""Fixtures of the torch backend's tests (the envs themselves are in torch_test_envs.py)."""

from __future__ import annotations

from typing import Any

import pytest
from torch_test_envs import EnvsForTests


@pytest.fixture
def test_envs(register_plugin: Any) -> None:
    register_plugin(EnvsForTests(), name="torch-test-envs")
