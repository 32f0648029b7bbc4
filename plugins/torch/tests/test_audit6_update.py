"""`forward_logprobs` (update.py) when no row of the batch trains: the one position it still computes (to
keep the pass and its graph cheap) comes back 0 like every other column, as its docstring says (the
sixth audit found it holding a real log-prob: harmless, every consumer masks it, but not the contract)."""

from __future__ import annotations

import pytest
import torch
from beyondagent_plugin_torch.models import load_policy
from beyondagent_plugin_torch.update import TrainBatch, forward_logprobs

pytestmark = pytest.mark.beyondagent_plugins("torch")


def test_a_batch_where_nothing_trains_gives_zeros_everywhere() -> None:
    model, _ = load_policy("tiny")
    ids = torch.randint(3, 100, (2, 6), generator=torch.Generator().manual_seed(0))
    zeros = torch.zeros(2, 5)
    batch = TrainBatch(ids, torch.ones(2, 6, dtype=torch.long), zeros, zeros, zeros)
    with torch.no_grad():
        logprobs, _ = forward_logprobs(model, batch, 1.0)
    assert logprobs.shape == (2, 5)
    assert not logprobs.any()
