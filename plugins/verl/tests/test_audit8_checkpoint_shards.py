"""A verl checkpoint is merged only when every rank's shard is there (`checkpoint.check_actor`,
eighth audit, mutant E18): a missing shard of any rank, the last one included, is a DataError that
names it; a complete checkpoint passes. Plain files in tmp_path, no verl and no merger.

From the eighth mutation audit.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from beyondagent_plugin_verl.checkpoint import check_actor, find_actor_dir

from beyondagent_core.errors import DataError


def actor_with(tmp_path: Path, world: int, ranks: list[int]) -> Path:
    actor = tmp_path / "checkpoints" / "global_step_3" / "actor"
    (actor / "huggingface").mkdir(parents=True)
    (actor / "huggingface" / "config.json").write_text("{}")
    (actor / "fsdp_config.json").write_text("{}")
    for rank in ranks:
        (actor / f"model_world_size_{world}_rank_{rank}.pt").write_bytes(b"x")
    return actor


def test_a_complete_checkpoint_passes(tmp_path: Path) -> None:
    actor = actor_with(tmp_path, 4, [0, 1, 2, 3])
    assert find_actor_dir(tmp_path) == actor
    check_actor(actor)


@pytest.mark.parametrize("missing", [3, 0, 1])
def test_a_missing_rank_is_named_the_last_one_included(tmp_path: Path, missing: int) -> None:
    actor = actor_with(tmp_path, 4, [rank for rank in range(4) if rank != missing])
    with pytest.raises(DataError) as caught:
        check_actor(actor)
    assert f"missing the shards of rank(s) [{missing}] of 4" in str(caught.value)
