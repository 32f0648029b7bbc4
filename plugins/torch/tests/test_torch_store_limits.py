"""The torch backend's stores at their limits: the session KV cache, checkpoints, the model cache, dtypes.

The KV store fills its budget exactly before it evicts (least recently used first), refuses a
negative budget, replaces a session stored again, and `take` hands out the common prefix but at
least one prompt token short, counting a re-render wherever the prompt leaves the cached ids. A
checkpoint holds each piece (the model and tokenizer, optimizer.pt's five states, state.json, what
`extra` adds), steps sort by number across a digit boundary, and `checkpoints` leaves out an
incomplete one. `build_once` leaves nothing behind when its build fails and replaces a file in its
way; a manifest names the files a build did not write. A dtype name a GPU cannot run is refused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from beyondagent_plugin_torch.checkpoint import (
    CHECKPOINTS_DIR,
    checkpoints,
    latest_checkpoint,
    save_checkpoint,
)
from beyondagent_plugin_torch.kv_cache import CachedPrefix, SessionCache, common_prefix, left_pad, stack_prefixes
from beyondagent_plugin_torch.model_cache import build_once, cache_root, models_dir, read_manifest, write_manifest
from beyondagent_plugin_torch.models import load_policy
from beyondagent_plugin_torch.precision import resolve_dtype, resolve_precision
from test_kv_cache_budget import prefix

from beyondagent_core.errors import SpecError

# --- the session KV store ------------------------------------------------------------------------


def test_the_budget_fills_exactly_before_the_least_recent_session_is_evicted() -> None:
    store = SessionCache(budget_tokens=10)
    store.put("a", prefix(4))
    store.put("b", prefix(6))  # 10 of 10: nothing evicted
    assert (store.tokens, len(store), store.stats.evictions) == (10, 2, 0)
    store.put("c", prefix(1))  # one past: "a", the least recently stored, goes
    assert (store.tokens, store.stats.evictions) == (7, 1)
    assert store.take("a", list(range(8))) is None and store.take("b", list(range(8))) is not None
    with pytest.raises(ValueError, match=">= 0 tokens, got -1"):
        SessionCache(budget_tokens=-1)
    nothing = SessionCache(budget_tokens=0)  # kv_cache_tokens: 0 keeps no session
    nothing.put("a", prefix(1))
    assert (len(nothing), nothing.tokens, nothing.stats.over_budget) == (0, 0, 1)


def test_a_session_stored_again_replaces_its_prefix() -> None:
    store = SessionCache(budget_tokens=10)
    store.put("a", prefix(4))
    store.put("a", prefix(3))
    assert (store.tokens, len(store), store.stats.evictions) == (3, 1, 0)
    store.drop("unknown")
    store.drop("a")
    assert (store.tokens, len(store)) == (0, 0)
    store.put("b", prefix(5))
    store.clear()
    assert (store.tokens, len(store)) == (0, 0)


@pytest.mark.parametrize(("prompt", "usable", "rerendered"), [
    ([0, 1, 2, 3, 4, 9], 5, False),  # the cached ids and one new token: all of them reused
    ([0, 1, 2, 3, 4], 4, False),  # exactly the cached ids: the last one is fed again
    ([0, 1, 7, 3, 4, 5], 2, True),  # re-rendered at the third token: its prefix only
    ([0, 1, 2], 2, True),  # shorter than the cache
    ([0], None, True),  # one token: it must be fed, nothing is reused
    ([9, 1, 2, 3, 4, 5], None, True),  # nothing in common
])
def test_take_hands_out_the_common_prefix_short_of_the_last_prompt_token(prompt: list[int], usable: int | None,
                                                                         rerendered: bool) -> None:
    store = SessionCache(budget_tokens=10)
    store.put("a", prefix(5))
    got = store.take("a", prompt)
    assert (None if got is None else len(got)) == usable
    if got is not None:
        assert got.ids == prompt[:usable] and got.keys[0].shape[1] == got.values[0].shape[1] == usable
    assert store.stats.rerenders == int(rerendered)
    assert (store.tokens, len(store)) == (0, 0)  # taken out either way: the caller stores the turn's prefix
    assert store.take("a", prompt) is None and store.take(None, prompt) is None


def test_common_prefix_and_padding_at_their_edges() -> None:
    assert common_prefix([1, 2, 3], [1, 2, 3], limit=-1) == 0
    assert common_prefix([1, 2, 3], [1, 2, 3], limit=2) == 2
    assert common_prefix([1, 2], [1, 2, 3], limit=5) == 2
    row = torch.ones(1, 2, 3)
    assert left_pad(row, 2, dim=1) is row and left_pad(row, 1, dim=1) is row
    assert left_pad(row, 4, dim=1)[0, :, 0].tolist() == [0.0, 0.0, 1.0, 1.0]
    two = CachedPrefix([5, 6], [torch.full((1, 2, 2), 3.0)], [torch.full((1, 2, 2), 4.0)])
    keys, values = stack_prefixes([two, None], 3, like=two)
    assert keys[0].shape == (2, 1, 3, 2)
    assert keys[0][0, 0, :, 0].tolist() == [0.0, 3.0, 3.0] and values[0][0, 0, :, 0].tolist() == [0.0, 4.0, 4.0]
    assert not keys[0][1].any() and not values[0][1].any()


# --- checkpoints ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny() -> tuple[Any, Any, Any, Any]:
    model, tokenizer = load_policy("tiny")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    return model, tokenizer, optimizer, scheduler


def save(run_dir: Path, step: int, tiny: tuple, *, keep: int = 2, extra: Any = None) -> Path:
    model, tokenizer, optimizer, scheduler = tiny
    return save_checkpoint(run_dir, step, model=model, tokenizer=tokenizer, optimizer=optimizer, scheduler=scheduler,
                           spec={"run": {"name": "pieces"}, "backend": {"lr": 0.01}}, keep=keep, extra=extra)


def test_a_checkpoint_holds_each_piece(tmp_path: Path, tiny: tuple) -> None:
    stale = tmp_path / CHECKPOINTS_DIR / ".staging-step_000007"  # a crash while saving step 7 before
    stale.mkdir(parents=True)
    (stale / "torn").write_text("x")
    final = save(tmp_path, 7, tiny, extra=lambda staging: (staging / "critic").mkdir())
    assert sorted(path.name for path in (tmp_path / CHECKPOINTS_DIR).iterdir()) == ["step_000007"]
    assert sorted(path.name for path in final.iterdir()) == ["critic", "model", "optimizer.pt", "state.json"]
    assert json.loads((final / "state.json").read_text()) == {"step": 7, "spec": {"run": {"name": "pieces"},
                                                                                  "backend": {"lr": 0.01}}}
    state = torch.load(final / "optimizer.pt", weights_only=False)
    assert set(state) == {"optimizer", "scheduler", "torch_rng", "cuda_rng", "python_rng"}
    assert state["scheduler"]["last_epoch"] == tiny[3].last_epoch
    saved, tokenizer = load_policy(str(final / "model"))
    assert all(torch.equal(a, b) for a, b in zip(saved.state_dict().values(), tiny[0].state_dict().values()))
    assert tokenizer.get_vocab() == tiny[1].get_vocab()
    assert save(tmp_path, 7, tiny) == final and not (final / "critic").exists()  # the same step again: replaced


def test_steps_sort_by_number_and_incomplete_checkpoints_are_left_out(tmp_path: Path, tiny: tuple) -> None:
    assert latest_checkpoint(tmp_path) is None
    save(tmp_path, 9, tiny, keep=1)
    save(tmp_path, 10, tiny, keep=1)  # step_000010 after step_000009: 9 goes
    assert [checkpoint.step for checkpoint in checkpoints(tmp_path)] == [10]
    root = tmp_path / CHECKPOINTS_DIR
    for name, state in (("step_000011", None), ("step_000012", "{not json"), ("step_000013", '{"spec": {}}')):
        (root / name).mkdir()
        (root / name / "optimizer.pt").write_bytes(b"")
        if state is not None:
            (root / name / "state.json").write_text(state)
    (root / "step_000014").mkdir()
    (root / "step_000014" / "state.json").write_text('{"step": 14, "spec": {}}')  # no optimizer.pt
    assert [checkpoint.step for checkpoint in checkpoints(tmp_path)] == [10]
    assert latest_checkpoint(tmp_path).path == root / "step_000010"


# --- the model cache -----------------------------------------------------------------------------


def test_a_failed_build_leaves_nothing_and_a_file_in_the_way_is_replaced(tmp_path: Path) -> None:
    target = tmp_path / "models" / "m"

    def broken(staging: Path) -> None:
        (staging / "half").write_text("x")
        raise RuntimeError("converter crashed")

    with pytest.raises(RuntimeError, match="converter crashed"):
        build_once(target, broken, lambda directory: (directory / "done").is_file())
    assert sorted(path.name for path in target.parent.iterdir()) == [".m.lock"]
    target.write_text("not a directory")
    built = build_once(target, lambda staging: (staging / "done").write_text("ok"),
                       lambda directory: (directory / "done").is_file())
    assert built == target and (target / "done").read_text() == "ok"
    assert build_once(target, broken, lambda directory: (directory / "done").is_file()) == target  # complete: no build


def test_a_manifest_names_what_the_build_did_not_write_and_reads_back_only_whole(tmp_path: Path) -> None:
    (tmp_path / "a.bin").write_bytes(b"abc")
    with pytest.raises(RuntimeError, match="the build did not write b.bin"):
        write_manifest(tmp_path, "manifest.json", ["a.bin", "b.bin"])
    write_manifest(tmp_path, "manifest.json", ["a.bin"], recipe="r")
    assert read_manifest(tmp_path, "manifest.json")["recipe"] == "r"
    (tmp_path / "a.bin").unlink()
    assert read_manifest(tmp_path, "manifest.json") is None
    for text in ("{broken", '{"recipe": "r"}', '{"files": {"a.bin": 3}}'):
        (tmp_path / "manifest.json").write_text(text)
        assert read_manifest(tmp_path, "manifest.json") is None


def test_the_cache_root_comes_from_the_environment_or_the_argument(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("BEYONDAGENT_CACHE", "~/cache")
    assert cache_root() == tmp_path / "cache" and models_dir() == tmp_path / "cache" / "models"
    assert models_dir(tmp_path / "other") == tmp_path / "other" / "models"


# --- dtype names ---------------------------------------------------------------------------------


def test_a_dtype_name_is_checked_against_the_device(monkeypatch: pytest.MonkeyPatch) -> None:
    cpu = torch.device("cpu")
    with pytest.raises(SpecError) as caught:
        resolve_dtype("float64", cpu, where="spec.yaml, key model.dtype")
    assert caught.value.where == "spec.yaml, key model.dtype"
    assert "valid: auto, float32, bfloat16, float16" in caught.value.message
    with pytest.raises(SpecError) as caught:
        resolve_precision("half", "float32", cpu, where="spec.yaml")
    assert caught.value.where == "spec.yaml, key model.dtype"
    assert resolve_precision("auto", "bfloat16", cpu).describe() == "bfloat16"  # pure: one dtype to name
    # a GPU without bf16 (the rule, without a GPU here): auto is float32, bfloat16 is refused
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: False)
    cuda = torch.device("cuda")
    assert resolve_dtype("auto", cuda) == torch.float32 and resolve_dtype("float16", cuda) == torch.float16
    with pytest.raises(SpecError, match="bfloat16 requested but this GPU does not support it"):
        resolve_dtype("bfloat16", cuda)
    assert resolve_dtype("bfloat16", cpu) == torch.bfloat16  # on a CPU it runs
