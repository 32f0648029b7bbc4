"""`forward_logprobs` (update.py) when no row of the batch trains: its docstring promises 0 in every
column where no row trains, but the fallback position it computes to keep the pass cheap (column
width - 2) comes back with that position's real log-prob. Harmless for training (every consumer
multiplies by the loss mask, which is 0 there), but the documented contract does not hold: kept here as
a strict xfail so that a fix (zeroing the fallback column, or rewording the docstring) is noticed."""

from __future__ import annotations

import pytest
import torch
from beyondagent_plugin_torch.models import load_policy
from beyondagent_plugin_torch.update import TrainBatch, forward_logprobs

pytestmark = pytest.mark.beyondagent_plugins("torch")


@pytest.mark.xfail(strict=True, reason="the nothing-trains fallback column holds a real log-prob, not the "
                                       "documented 0 (masked everywhere it is used)")
def test_a_batch_where_nothing_trains_gives_zeros_everywhere() -> None:
    model, _ = load_policy("tiny")
    ids = torch.randint(3, 100, (2, 6), generator=torch.Generator().manual_seed(0))
    zeros = torch.zeros(2, 5)
    batch = TrainBatch(ids, torch.ones(2, 6, dtype=torch.long), zeros, zeros, zeros)
    with torch.no_grad():
        logprobs, _ = forward_logprobs(model, batch, 1.0)
    assert logprobs.shape == (2, 5)
    assert not logprobs.any()
