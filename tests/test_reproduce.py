"""`reproduce.json`: a run directory says what runs it again (beyondagent_core/reproduce.py)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from beyondagent_core import reproduce

ROOT = Path(__file__).resolve().parents[1]


def test_the_record_names_the_command_commit_packages_and_seed_and_masks_a_secret(tmp_path: Path,
                                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["/x/bin/beyondagent", "run", "spec.yaml", "llm.api_key=sk-live-abcdefghijkl",
                                      "backend.lr=1e-5"])
    reproduce.write(tmp_path, seed=7, packages={"beyondagent-plugin-torch": "0.1.0", "beyondagent": "0.1.0"})
    record = json.loads((tmp_path / "reproduce.json").read_text())
    assert record["command"] == ["beyondagent", "run", "spec.yaml", "llm.api_key=***", "backend.lr=1e-5"]
    assert "sk-live" not in (tmp_path / "reproduce.json").read_text()
    assert record["seed"] == 7 and record["spec"] == "spec.resolved.yaml"
    assert list(record["packages"]) == ["beyondagent", "beyondagent-plugin-torch"]
    if (ROOT / ".git").exists():  # a checkout: its commit, 40 hex digits
        assert len(record["project"]["commit"]) == 40 and "uncommitted_changes" in record["project"]


def test_the_backend_adds_its_part_and_a_resume_keeps_the_earlier_record(tmp_path: Path) -> None:
    reproduce.write(tmp_path, seed=0, packages={})
    reproduce.add(tmp_path, device="cpu", precision={"compute": "float32", "params": "float32"})
    reproduce.write(tmp_path, seed=0, packages={}, resume=True)
    record = json.loads((tmp_path / "reproduce.json").read_text())
    assert "device" not in record and record["earlier"][0]["device"] == "cpu"
    reproduce.add(tmp_path / "absent", device="cpu")  # no record there: nothing written, nothing raised
    assert not (tmp_path / "absent").exists()


def test_the_model_digest_changes_with_any_weight_or_config_byte(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"\x00" * 1000)
    (model / "config.json").write_text('{"hidden_size": 8}')
    (model / "notes.md").write_text("not part of the model")
    first = reproduce.model_digest(model)
    assert first["files"] == 2 and first["bytes"] == 1000 + len('{"hidden_size": 8}')
    (model / "notes.md").write_text("edited")
    assert reproduce.model_digest(model)["sha256"] == first["sha256"]
    weights = model / "model.safetensors"
    mtime = weights.stat().st_mtime_ns
    weights.write_bytes(b"\x00" * 999 + b"\x01")
    os.utime(weights, ns=(mtime + 1000, mtime + 1000))  # a rewrite has a later mtime, even on a coarse clock
    assert reproduce.model_digest(model)["sha256"] != first["sha256"]
    assert reproduce.model_digest("org/hub-model") == {"path": "org/hub-model", "sha256": None}


def test_each_resume_keeps_every_earlier_record_flat(tmp_path: Path) -> None:
    for seed in (1, 2, 3):
        reproduce.write(tmp_path, seed=seed, packages={}, resume=True)
    record = json.loads((tmp_path / "reproduce.json").read_text())
    assert record["seed"] == 3 and [r["seed"] for r in record["earlier"]] == [1, 2]
    assert not any("earlier" in r for r in record["earlier"])


def test_the_digest_is_kept_next_to_the_model_and_reused_while_its_files_are_unchanged(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"\x00" * 64)
    first = reproduce.model_digest(model)
    memo = json.loads((model / reproduce.DIGEST_MEMO).read_text())
    assert memo["sha256"] == first["sha256"] and reproduce.model_digest(model) == first  # the memo is not hashed
    (model / reproduce.DIGEST_MEMO).write_text(json.dumps({**memo, "sha256": "from-the-memo"}))
    assert reproduce.model_digest(model)["sha256"] == "from-the-memo"  # read, not recomputed
    (model / "model.safetensors").write_bytes(b"\x01" * 65)
    assert reproduce.model_digest(model)["sha256"] not in ("from-the-memo", first["sha256"])  # a change rehashes


@pytest.mark.parametrize("content", ["[1, 2]", '"text"', '{"seed": 1, "earlier": 5}'])
def test_a_record_that_is_not_what_this_module_wrote_is_kept_and_never_fatal(tmp_path: Path, content: str) -> None:
    """A hand-edited or damaged reproduce.json (valid JSON, not a record) neither crashes `add` nor a
    resume; the resume keeps what was there under `earlier` (found by the eighth mutation audit)."""
    path = tmp_path / "reproduce.json"
    path.write_text(content)
    reproduce.add(tmp_path, device="cpu")  # not an object: logged, not raised, the file left as it was
    kept = json.loads(content)
    assert path.read_text() == content or isinstance(kept, dict)
    reproduce.write(tmp_path, seed=4, packages={}, resume=True)
    record = json.loads(path.read_text())
    assert record["seed"] == 4
    if isinstance(kept, dict):
        assert record["earlier"] == [{"unreadable": 5}, {"seed": 1, "device": "cpu"}]
    else:
        assert record["earlier"] == [{"unreadable": kept}]
