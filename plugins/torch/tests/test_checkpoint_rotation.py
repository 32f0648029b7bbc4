"""`save_checkpoint(..., keep=N)` keeps the newest N checkpoints: the oldest go, never the one just written."""

from __future__ import annotations

import torch
from beyondagent_plugin_torch.checkpoint import CHECKPOINTS_DIR, checkpoints, latest_checkpoint, save_checkpoint
from beyondagent_plugin_torch.models import load_policy


def test_only_the_newest_checkpoints_are_kept(tmp_path) -> None:
    model, tokenizer = load_policy("tiny")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    for step in (1, 2, 3, 4):
        save_checkpoint(tmp_path, step, model=model, tokenizer=tokenizer, optimizer=optimizer, scheduler=scheduler,
                        spec={"run": {"name": "rotation"}}, keep=2)
        assert latest_checkpoint(tmp_path).step == step  # the one just written survives its own rotation
    assert [checkpoint.step for checkpoint in checkpoints(tmp_path)] == [4, 3]
    assert sorted(path.name for path in (tmp_path / CHECKPOINTS_DIR).iterdir()) == ["step_000003", "step_000004"]
