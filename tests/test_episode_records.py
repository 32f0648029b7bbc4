"""episodes.jsonl's format: sampling (`logging.episodes`), the compact token block and its expansion."""

from __future__ import annotations

import json

import pytest

from beyondagent_core.episode_records import (
    EpisodeSampling,
    PieceCache,
    check_sampling,
    expand_mask,
    expand_tokens,
    run_lengths,
    token_count,
    token_view,
    value_runs,
)
from beyondagent_core.spec import LoggingSection


@pytest.mark.parametrize("mask", [[], [0], [1], [0, 0, 1, 1, 1, 0], [1, 1, 0, 1], [0, 1, 0, 1, 0]])
def test_mask_run_lengths_round_trip(mask: list[int]) -> None:
    assert expand_mask(run_lengths(mask)) == mask


def test_run_lengths_start_with_zeros() -> None:
    assert run_lengths([1, 1, 0]) == [0, 2, 1]
    assert value_runs([0.5, 0.5, -0.0, float("nan")]) == [[0.5, 2], [0.0, 1], [None, 1]]


def test_token_view_is_compact_and_expands_back() -> None:
    ids = [5, 6, 7, 7, 8]
    mask = [0, 0, 1, 1, 0]
    block = token_view(ids, mask, [0.0, 0.0, -0.12345, float("nan"), 0.0], [0, 0, 0.3, 0.3, 0],
                       ["a", "b", "c", "c", "d"], [(2, 4)], prompt_length=2)
    assert block["mask"] == [2, 2, 1]
    assert block["logprobs"] == [-0.123, None]  # only trained positions, rounded; NaN as null
    assert block["vocab"] == {"5": "a", "6": "b", "7": "c", "8": "d"}
    assert block["advantages"] == [[0.0, 2], [0.3, 2], [0.0, 1]]
    record = json.loads(json.dumps({"tokens": block}))
    rows = expand_tokens(record)
    assert [(r["id"], r["text"], r["mask"], r["logprob"], r["advantage"]) for r in rows] == [
        (5, "a", 0, None, 0.0), (6, "b", 0, None, 0.0), (7, "c", 1, -0.123, 0.3), (7, "c", 1, None, 0.3),
        (8, "d", 0, None, 0.0)]
    assert token_count(record) == (5, 2)


def test_a_damaged_token_block_is_named() -> None:
    with pytest.raises(ValueError, match="4 ids"):
        token_view([1, 2, 3, 4], [0, 1], [0.0, 0.0], None, ["a", "b"])
    with pytest.raises(ValueError, match="inconsistent"):
        expand_tokens({"tokens": {"ids": [1, 2], "vocab": {}, "mask": [1], "logprobs": []}})
    assert expand_tokens({"tokens": None}) == []


def test_sampling_all_none_failures() -> None:
    groups = [0, 0, 1, 1]
    failed = [True, False, False, True]
    assert EpisodeSampling("all").picked(1, "train", groups, failed) == [0, 1, 2, 3]
    assert EpisodeSampling("none").picked(1, "train", groups, failed) == []
    assert EpisodeSampling("0").picked(1, "train", groups, failed) == []
    assert EpisodeSampling("failures").picked(1, "train", groups, failed) == [0, 3]


def test_a_fraction_keeps_whole_groups_and_at_least_one_per_step() -> None:
    groups = [g for g in range(40) for _ in range(8)]
    failed = [False] * len(groups)
    sampling = EpisodeSampling("0.25", seed=3)
    kept_share = []
    for step in range(1, 51):
        picked = sampling.picked(step, "train", groups, failed)
        kept = {groups[i] for i in picked}
        assert picked == [i for i in range(len(groups)) if groups[i] in kept]  # whole groups only
        assert kept
        kept_share.append(len(kept) / 40)
    assert 0.2 < sum(kept_share) / len(kept_share) < 0.3
    assert sampling.picked(7, "train", groups, failed) == sampling.picked(7, "train", groups, failed)  # deterministic
    tiny = EpisodeSampling("0.01").picked(1, "val", [0, 1, 2], [False] * 3)
    assert len(tiny) == 1  # one group even when the fraction rounds to none


@pytest.mark.parametrize("value, canonical", [("all", "all"), ("FAILURES", "failures"), (0.5, "0.5"), ("1", "1.0"),
                                              ("none", "none")])
def test_check_sampling_accepts(value: object, canonical: str) -> None:
    assert check_sampling(value) == canonical


@pytest.mark.parametrize("value", ["some", "1.5", "-0.1", "nan"])
def test_check_sampling_refuses_with_what_is_allowed(value: str) -> None:
    with pytest.raises(ValueError, match="all, none, failures or a fraction"):
        check_sampling(value)


def test_the_spec_key_is_checked() -> None:
    assert LoggingSection().episodes == "0.1"
    assert LoggingSection(episodes="failures").episodes == "failures"
    with pytest.raises(ValueError, match="logging.episodes must be"):
        LoggingSection(episodes="lots")


def test_piece_cache_decodes_each_id_once() -> None:
    calls: list[list[list[int]]] = []

    def decode(batch: list[list[int]]) -> list[str]:
        calls.append(batch)
        return [f"<{ids[0]}>" for ids in batch]

    cache = PieceCache(decode)
    assert cache.pieces([3, 1, 3]) == ["<3>", "<1>", "<3>"]
    assert cache.pieces([1, 2]) == ["<1>", "<2>"]
    assert calls == [[[1], [3]], [[2]]]


def test_validation_keeps_the_same_tasks_at_every_evaluation() -> None:
    groups = list(range(64))
    sampling = EpisodeSampling("0.2", seed=1)
    kept = [sampling.picked(step, "val", groups, [False] * 64) for step in (0, 20, 40)]
    assert kept[0] == kept[1] == kept[2] and 0 < len(kept[0]) < 64
    train = [sampling.picked(step, "train", groups, [False] * 64) for step in (1, 2, 3)]
    assert len({tuple(picked) for picked in train}) > 1
