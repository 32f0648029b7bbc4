"""The opponent pool's bookkeeping on the real tiny model, by hand (opponent_pool.py): a snapshot is a
frozen copy with parameters of its own; a recycled entry starts at the policy's rating; snapshots are
taken every `refresh_every` updates (not one step early); the step's draw/loss rates and the best
snapshot's rating are what the games say; the extra generation batches of a step draw apart; a saved
pool loads back with its ratings, and a snapshot missing a trained parameter is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from beyondagent_plugin_torch.config import OpponentPoolSettings
from beyondagent_plugin_torch.models import load_policy
from beyondagent_plugin_torch.opponent_pool import OpponentPool, PoolEntry, elo_update, frozen_copy

from beyondagent_core.types import Task

pytestmark = pytest.mark.beyondagent_plugins("torch", "mixers", "advantages")


@pytest.fixture(scope="module")
def tiny() -> torch.nn.Module:
    model, _ = load_policy("tiny")
    return model


def make_pool(model, **settings) -> OpponentPool:
    trained = {name for name, _ in model.named_parameters()}
    return OpponentPool(OpponentPoolSettings(**settings), rollout_model=model, trained=trained,
                        make_scheduler=lambda copy: None, seed=3)


def first_weight(model) -> torch.Tensor:
    return next(p for p in model.parameters() if p.dtype.is_floating_point)


def test_a_frozen_copy_needs_no_gradient_and_owns_its_weights(tiny) -> None:
    model = frozen_copy(tiny)
    weights = list(model.parameters())
    assert weights and not any(p.requires_grad for p in weights)
    live = {p.data_ptr() for p in tiny.parameters()}
    assert not any(p.data_ptr() in live for p in weights)  # no storage shared with the policy
    assert torch.equal(first_weight(model), first_weight(tiny)) and not model.training


def test_a_snapshot_every_refresh_every_updates(tiny) -> None:
    pool = make_pool(tiny, size=3, refresh_every=3)
    assert [pool.after_update(step) for step in range(1, 8)] == [False, False, True, False, False, True, False]
    assert [entry.step for entry in pool.entries] == [3, 6]


def test_a_recycled_entry_starts_at_the_policys_rating_and_holds_its_weights(tiny) -> None:
    policy = frozen_copy(tiny)  # stands for the rollout weights, changed between snapshots below
    pool = make_pool(policy, size=1, refresh_every=1)
    pool.take(0)
    entry = pool.entries[0]
    pool.record([(entry, 1.0)])  # the policy won an even game: 1016 against 984
    assert (pool.rating, entry.rating) == (1016.0, 984.0)
    with torch.no_grad():
        first_weight(policy).add_(1.0)
    pool.take(1)  # size 1: the step-0 entry is overwritten in place
    assert pool.entries == [entry] and entry.step == 1
    assert entry.rating == 1016.0  # the snapshot is the policy now: it starts at the policy's rating
    assert torch.equal(first_weight(entry.model), first_weight(policy))


def test_the_steps_rates_and_the_best_snapshots_rating(tiny) -> None:
    pool = make_pool(tiny, size=2)
    weak = PoolEntry(step=0, model=None, scheduler=None, rating=900.0)
    strong = PoolEntry(step=5, model=None, scheduler=None, rating=1200.0)
    pool.entries = [weak, strong]
    results = [(weak, 1.0), (strong, 0.5), (strong, 0.5), (weak, 0.0)]
    metrics = pool.record(results)
    rating, ratings = 1000.0, {id(weak): 900.0, id(strong): 1200.0}
    for entry, score in results:
        rating, ratings[id(entry)] = elo_update(rating, ratings[id(entry)], score)
    assert metrics["pool/elo"] == pytest.approx(rating)
    assert (metrics["pool/win_rate"], metrics["pool/draw_rate"], metrics["pool/loss_rate"]) == (0.25, 0.5, 0.25)
    assert metrics["pool/elo_best_snapshot"] == pytest.approx(max(ratings.values()))
    assert metrics["pool/elo_best_snapshot"] == pytest.approx(strong.rating) and strong.rating > weak.rating
    assert (metrics["pool/games"], metrics["pool/size"]) == (4.0, 2.0)


def test_extra_generation_batches_of_a_step_draw_apart(tiny) -> None:
    pool = make_pool(tiny, size=2, games=0.5)
    pool.entries = [PoolEntry(step=0, model=None, scheduler=None, rating=1000.0),
                    PoolEntry(step=5, model=None, scheduler=None, rating=1000.0)]
    jobs = [(group, Task(f"t{group}")) for group in range(32)]

    def drawn(*extra: object) -> list:
        return [None if o is None else o.entry.step for o in pool.opponents(4, jobs, *extra)]

    assert drawn(1) == drawn(1)  # the same batch draws the same on resume
    assert len({tuple(drawn()), tuple(drawn(1)), tuple(drawn(2))}) == 3  # each batch its own draw


def test_a_saved_pool_loads_back_and_a_missing_parameter_is_refused(tiny, tmp_path: Path) -> None:
    policy = frozen_copy(tiny)
    pool = make_pool(policy, size=2, refresh_every=1)
    pool.take(0)
    with torch.no_grad():
        first_weight(policy).mul_(2.0)
    pool.take(1)
    pool.record([(pool.entries[0], 1.0), (pool.entries[1], 0.0), (pool.entries[1], 1.0)])
    pool.save(tmp_path / "pool")

    loaded = make_pool(policy, size=2, refresh_every=1)
    loaded.load(tmp_path / "pool")
    assert loaded.rating == pool.rating
    assert [(e.step, e.rating) for e in loaded.entries] == [(e.step, e.rating) for e in pool.entries]
    assert len({e.rating for e in loaded.entries} | {loaded.rating}) == 3  # each its own rating
    for mine, saved in zip(loaded.entries, pool.entries):
        assert torch.equal(first_weight(mine.model), first_weight(saved.model))
    assert not torch.equal(first_weight(loaded.entries[0].model), first_weight(loaded.entries[1].model))

    path = tmp_path / "pool" / "step_1.pt"
    weights = torch.load(path, weights_only=True)
    dropped = sorted(weights)[0]
    del weights[dropped]
    torch.save(weights, path)
    with pytest.raises(ValueError, match="lacks 1 trained parameters"):
        make_pool(policy, size=2).load(tmp_path / "pool")
