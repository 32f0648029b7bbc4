"""`model_digest` hashes each model file's name and contents (beyondagent_core/reproduce.py)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from beyondagent_core import reproduce


def test_the_digest_is_sha256_over_each_files_name_then_contents_in_name_order(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"W" * 10)
    (model / "config.json").write_bytes(b'{"a": 1}')
    (model / "README.md").write_bytes(b"not hashed")
    expected = hashlib.sha256(b"config.json" + b'{"a": 1}' + b"model.safetensors" + b"W" * 10).hexdigest()
    assert reproduce.model_digest(model)["sha256"] == expected


def test_renaming_a_model_file_changes_the_digest(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"W" * 10)
    first = reproduce.model_digest(model)["sha256"]
    (model / "model.safetensors").rename(model / "weights.safetensors")  # same bytes, another name
    renamed = reproduce.model_digest(model)["sha256"]
    assert renamed == hashlib.sha256(b"weights.safetensors" + b"W" * 10).hexdigest() and renamed != first
