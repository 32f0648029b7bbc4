"""Tests of the mixers plugin: counts, sampling, determinism, schedules, caps and registration."""

from __future__ import annotations

from collections import Counter
from importlib.metadata import entry_points

import attrs
import beyondagent_plugin_mixers
import pytest
from beyondagent_plugin_mixers.config import OriginalConfig, RatioConfig, SyntheticConfig
from beyondagent_plugin_mixers.mixers import Original, Ratio, Synthetic
from omegaconf import OmegaConf
from structlog.testing import capture_logs

from beyondagent_core import MixerSpec, Task


def originals(n: int) -> list[Task]:
    return [Task(task_id=f"o{i}", query=f"original {i}") for i in range(n)]


def synthetics(n_seeds: int, per_seed: int) -> list[Task]:
    """`per_seed` synthetic tasks for each of `n_seeds` seeds, grouped by seed."""
    return [
        Task(task_id=f"s{seed}-{j}", query=f"synthetic {seed}.{j}", origin="synthetic", seed_task_id=f"o{seed}")
        for seed in range(n_seeds)
        for j in range(per_seed)
    ]


def ids(tasks: list[Task]) -> list[str]:
    return [task.task_id for task in tasks]


def split(tasks: list[Task]) -> tuple[list[Task], list[Task]]:
    return ([t for t in tasks if t.origin == "original"], [t for t in tasks if t.origin == "synthetic"])


ORIGINAL = originals(10)
SYNTHETIC = synthetics(10, 4)  # 40 tasks, 4 per seed


# --- original / synthetic ------------------------------------------------------------------


def test_original_returns_each_original_once_and_no_synthetic() -> None:
    mixed = Original(OriginalConfig()).mix(ORIGINAL, SYNTHETIC, epoch=0, seed=1)
    assert sorted(ids(mixed)) == sorted(ids(ORIGINAL))
    assert ids(mixed) != ids(ORIGINAL)  # shuffled by default

    ordered = Original(OriginalConfig(shuffle=False)).mix(ORIGINAL, SYNTHETIC, epoch=3, seed=1)
    assert ordered == ORIGINAL


def test_synthetic_returns_each_synthetic_once_and_no_original() -> None:
    mixed = Synthetic(SyntheticConfig()).mix(ORIGINAL, SYNTHETIC, epoch=0, seed=1)
    assert sorted(ids(mixed)) == sorted(ids(SYNTHETIC))
    assert ids(mixed) != ids(SYNTHETIC)

    ordered = Synthetic(SyntheticConfig(shuffle=False)).mix(ORIGINAL, SYNTHETIC, epoch=0, seed=1)
    assert ordered == SYNTHETIC


def test_synthetic_per_seed_cap_keeps_at_most_cap_per_seed_and_redraws_each_epoch() -> None:
    mixer = Synthetic(SyntheticConfig(per_seed_cap=2, shuffle=False))
    chosen = []
    for epoch in range(4):
        mixed = mixer.mix(ORIGINAL, SYNTHETIC, epoch=epoch, seed=7)
        assert len(mixed) == 10 * 2
        assert set(Counter(t.seed_task_id for t in mixed).values()) == {2}
        assert ids(mixed) == [i for i in ids(SYNTHETIC) if i in set(ids(mixed))]  # input order kept
        chosen.append(ids(mixed))
    assert len({tuple(c) for c in chosen}) > 1  # which two per seed changes across epochs


# --- ratio: counts and sampling ------------------------------------------------------------


def test_ratio_takes_all_originals_and_ratio_times_originals_synthetic() -> None:
    mixed = Ratio(RatioConfig(synthetic_ratio=1.5)).mix(ORIGINAL, SYNTHETIC, epoch=0, seed=3)
    orig, synth = split(mixed)
    assert sorted(ids(orig)) == sorted(ids(ORIGINAL))
    assert len(synth) == 15
    assert set(ids(synth)) <= set(ids(SYNTHETIC))


@pytest.mark.parametrize(("n_original", "ratio", "expected"), [(10, 0.0, 0), (10, 0.25, 2), (100, 0.29, 29), (7, 1.0, 7)])
def test_ratio_count_is_the_floor_of_originals_times_ratio(n_original: int, ratio: float, expected: int) -> None:
    mixed = Ratio(RatioConfig(synthetic_ratio=ratio)).mix(originals(n_original), synthetics(50, 2), epoch=0, seed=0)
    assert len(split(mixed)[1]) == expected


def test_ratio_samples_without_replacement() -> None:
    mixer = Ratio(RatioConfig(synthetic_ratio=3.9))  # 39 of the 40 synthetic tasks
    for epoch in range(5):
        mixed = mixer.mix(ORIGINAL, SYNTHETIC, epoch=epoch, seed=11)
        assert len(mixed) == 10 + 39
        assert len(set(ids(mixed))) == len(mixed)


def test_ratio_is_deterministic_for_the_same_seed_and_epoch() -> None:
    config = RatioConfig(synthetic_ratio=0.5, per_seed_cap=3)
    first = Ratio(config).mix(ORIGINAL, SYNTHETIC, epoch=2, seed=42)
    again = Ratio(config).mix(tuple(ORIGINAL), tuple(SYNTHETIC), epoch=2, seed=42)  # a new instance, tuples
    assert first == again


def test_ratio_remixes_every_epoch_and_for_every_seed() -> None:
    mixer = Ratio(RatioConfig(synthetic_ratio=0.5))
    by_epoch = [mixer.mix(ORIGINAL, SYNTHETIC, epoch=epoch, seed=42) for epoch in range(3)]
    assert len({tuple(ids(m)) for m in by_epoch}) == 3
    # The synthetic sample itself changes, not only the order.
    assert len({frozenset(ids(split(m)[1])) for m in by_epoch}) == 3
    assert mixer.mix(ORIGINAL, SYNTHETIC, epoch=0, seed=43) != by_epoch[0]


def test_config_seed_overrides_the_run_seed() -> None:
    mixer = Ratio(RatioConfig(synthetic_ratio=0.5, seed=5))
    assert mixer.mix(ORIGINAL, SYNTHETIC, epoch=1, seed=1) == mixer.mix(ORIGINAL, SYNTHETIC, epoch=1, seed=2)
    assert mixer.mix(ORIGINAL, SYNTHETIC, epoch=1, seed=1) != mixer.mix(ORIGINAL, SYNTHETIC, epoch=2, seed=1)


def test_ratio_without_shuffle_is_originals_then_sampled_synthetic_in_input_order() -> None:
    mixed = Ratio(RatioConfig(synthetic_ratio=2.0, shuffle=False)).mix(ORIGINAL, SYNTHETIC, epoch=4, seed=9)
    assert mixed[:10] == ORIGINAL
    tail = ids(mixed[10:])
    assert len(tail) == 20
    assert tail == [i for i in ids(SYNTHETIC) if i in set(tail)]


def test_ratio_does_not_modify_its_inputs() -> None:
    original, synthetic = list(ORIGINAL), list(SYNTHETIC)
    Ratio(RatioConfig(synthetic_ratio=0.5, per_seed_cap=1)).mix(original, synthetic, epoch=0, seed=0)
    assert original == ORIGINAL and synthetic == SYNTHETIC


# --- ratio: too few synthetic tasks, use_original ------------------------------------------


def test_not_enough_synthetic_takes_all_and_warns() -> None:
    few = synthetics(3, 1)
    with capture_logs() as logs:
        mixed = Ratio(RatioConfig(synthetic_ratio=0.5)).mix(ORIGINAL, few, epoch=0, seed=0)
    assert sorted(ids(split(mixed)[1])) == sorted(ids(few))
    warnings = [entry for entry in logs if entry["event"] == "mixer.not_enough_synthetic"]
    assert len(warnings) == 1
    assert warnings[0]["log_level"] == "warning"
    assert (warnings[0]["wanted"], warnings[0]["available"]) == (5, 3)


def test_enough_synthetic_does_not_warn() -> None:
    with capture_logs() as logs:
        Ratio(RatioConfig(synthetic_ratio=4.0)).mix(ORIGINAL, SYNTHETIC, epoch=0, seed=0)  # exactly 40
    assert not [entry for entry in logs if entry["event"] == "mixer.not_enough_synthetic"]


def test_huge_ratio_means_every_synthetic_task() -> None:
    with capture_logs():
        mixed = Ratio(RatioConfig(synthetic_ratio=1e6)).mix(ORIGINAL, SYNTHETIC, epoch=0, seed=0)
    assert sorted(ids(mixed)) == sorted(ids(ORIGINAL) + ids(SYNTHETIC))


def test_use_original_false_still_counts_synthetic_from_the_originals() -> None:
    mixed = Ratio(RatioConfig(use_original=False, synthetic_ratio=0.5)).mix(ORIGINAL, SYNTHETIC, epoch=0, seed=0)
    assert len(mixed) == 5
    assert all(task.origin == "synthetic" for task in mixed)
    assert len(set(ids(mixed))) == 5

    # With no originals, the ratio asks for nothing.
    with capture_logs():
        assert Ratio(RatioConfig(use_original=False)).mix([], SYNTHETIC, epoch=0, seed=0) == []


# --- ratio: per-seed cap -------------------------------------------------------------------


def test_ratio_per_seed_cap_is_never_exceeded() -> None:
    mixer = Ratio(RatioConfig(synthetic_ratio=1.5, per_seed_cap=2))  # wants 15 of 20 eligible
    for epoch in range(6):
        mixed = mixer.mix(ORIGINAL, SYNTHETIC, epoch=epoch, seed=13)
        synth = split(mixed)[1]
        assert len(synth) == 15
        assert max(Counter(t.seed_task_id for t in synth).values()) <= 2


def test_per_seed_cap_limits_what_is_available() -> None:
    with capture_logs() as logs:
        mixed = Ratio(RatioConfig(synthetic_ratio=3.0, per_seed_cap=1)).mix(ORIGINAL, SYNTHETIC, epoch=0, seed=0)
    synth = split(mixed)[1]
    assert len(synth) == 10  # one per seed
    assert Counter(t.seed_task_id for t in synth) == Counter(f"o{i}" for i in range(10))
    assert [(e["wanted"], e["available"]) for e in logs if e["event"] == "mixer.not_enough_synthetic"] == [(30, 10)]


def test_tasks_without_seed_task_id_are_not_capped() -> None:
    unseeded = [Task(task_id=f"u{i}", origin="synthetic") for i in range(5)]
    mixed = Synthetic(SyntheticConfig(per_seed_cap=1, shuffle=False)).mix([], synthetics(2, 3) + unseeded, epoch=0, seed=0)
    assert ids(mixed)[-5:] == ids(unseeded)
    assert len(mixed) == 2 + 5


# --- ratio: schedules ----------------------------------------------------------------------


def test_linear_schedule_decays_then_stays() -> None:
    mixer = Ratio(RatioConfig(synthetic_ratio=2.0, schedule="linear", final_ratio=0.0, schedule_epochs=3,
                              shuffle=False))
    assert [mixer.ratio_for_epoch(e) for e in range(5)] == [2.0, 1.0, 0.0, 0.0, 0.0]
    counts = [len(split(mixer.mix(ORIGINAL, SYNTHETIC, epoch=e, seed=0))[1]) for e in range(5)]
    assert counts == [20, 10, 0, 0, 0]


def test_linear_schedule_can_grow() -> None:
    mixer = Ratio(RatioConfig(synthetic_ratio=0.0, schedule="linear", final_ratio=1.0, schedule_epochs=5))
    counts = [len(split(mixer.mix(ORIGINAL, SYNTHETIC, epoch=e, seed=0))[1]) for e in range(7)]
    assert counts == [0, 2, 5, 7, 10, 10, 10]


def test_constant_schedule_ignores_final_ratio() -> None:
    mixer = Ratio(RatioConfig(synthetic_ratio=0.5, final_ratio=3.0, schedule_epochs=4))
    assert {mixer.ratio_for_epoch(e) for e in range(6)} == {0.5}


def test_linear_schedule_of_one_epoch_starts_at_final_ratio() -> None:
    mixer = Ratio(RatioConfig(synthetic_ratio=2.0, schedule="linear", final_ratio=0.5, schedule_epochs=1))
    assert [mixer.ratio_for_epoch(e) for e in range(3)] == [0.5, 0.5, 0.5]


# --- config validation ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "key"),
    [
        (lambda: Ratio(RatioConfig(synthetic_ratio=-0.5)), "synthetic_ratio"),
        (lambda: Ratio(RatioConfig(synthetic_ratio=float("nan"))), "synthetic_ratio"),
        (lambda: Ratio(RatioConfig(schedule="cosine")), "schedule"),
        (lambda: Ratio(RatioConfig(schedule="linear")), "final_ratio"),
        (lambda: Ratio(RatioConfig(schedule="linear", final_ratio=-1.0)), "final_ratio"),
        (lambda: Ratio(RatioConfig(schedule_epochs=0)), "schedule_epochs"),
        (lambda: Ratio(RatioConfig(per_seed_cap=0)), "per_seed_cap"),
        (lambda: Synthetic(SyntheticConfig(per_seed_cap=-2)), "per_seed_cap"),
    ],
)
def test_bad_config_raises_value_error_naming_the_key(build, key: str) -> None:
    with pytest.raises(ValueError, match=key):
        build()


def test_negative_epoch_is_rejected() -> None:
    with pytest.raises(ValueError, match="epoch"):
        Ratio(RatioConfig()).mix(ORIGINAL, SYNTHETIC, epoch=-1, seed=0)


def test_configs_load_through_omegaconf_like_a_spec_block() -> None:
    schema = OmegaConf.merge(OmegaConf.structured(RatioConfig), {"synthetic_ratio": 2, "per_seed_cap": 3})
    config = OmegaConf.to_object(schema)
    assert config == RatioConfig(synthetic_ratio=2.0, per_seed_cap=3)
    assert isinstance(config.synthetic_ratio, float)
    for cls in (OriginalConfig, SyntheticConfig):
        assert OmegaConf.to_object(OmegaConf.structured(cls)) == cls()


# --- registration --------------------------------------------------------------------------


def test_hook_returns_the_three_mixers_with_loadable_factories() -> None:
    records = beyondagent_plugin_mixers.beyondagent_mixers()
    assert [r.name for r in records] == ["original", "synthetic", "ratio"]
    expected = {"original": (Original, OriginalConfig), "synthetic": (Synthetic, SyntheticConfig),
                "ratio": (Ratio, RatioConfig)}
    for record in records:
        assert isinstance(record, MixerSpec)
        assert isinstance(record.factory, str)  # lazy: imported only when selected
        assert attrs.has(record.config_cls)
        assert record.summary
        factory = record.load_factory()
        assert (factory, record.config_cls) == expected[record.name]
        mixed = factory(record.config_cls()).mix(ORIGINAL, SYNTHETIC, epoch=0, seed=0)
        assert all(isinstance(task, Task) for task in mixed)


def test_entry_point_is_declared() -> None:
    points = {ep.name: ep.value for ep in entry_points(group="beyondagent")}
    assert points.get("mixers") == "beyondagent_plugin_mixers"
