"""A store that fails mid-training is named in the run's error, not the torch backend that called it.

The real torch backend trains the quickstart (tiny policy, gymnasium FrozenLake) with an experience
store of a made-up plugin whose `add` raises when the first step's lessons are stored: the error
names the store's key, name and plugin, and the backend only as its caller.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from beyondagent_core import ExperienceStoreSpec, hookimpl
from beyondagent_core.errors import RunError
from beyondagent_plugin_experience.store import SqliteExperienceStore

QUICKSTART = Path(__file__).resolve().parents[3] / "examples" / "quickstart.yaml"
SHRINK = ("backend.total_steps=1", "backend.batch_size=1", "algorithm.group_size=2", "backend.eval_every=0",
          "backend.save_every=0", "tasks.train.count=1", "tasks.val.count=1", "backend.report=false")
pytestmark = pytest.mark.beyondagent_plugins("gym", "mixers", "torch", "experience")


class FullDisk(SqliteExperienceStore):
    """The `experience` store on a full disk: storing the step's lessons (even none) fails."""

    def add(self, experiences):
        raise OSError(28, "No space left on device")


class Plugin:
    @hookimpl
    def beyondagent_experience_stores(self):
        return [ExperienceStoreSpec(name="full_disk", factory=lambda config: FullDisk())]


def test_a_store_failing_under_the_torch_backend_is_named(run_spec, register_plugin, tmp_path) -> None:
    register_plugin(Plugin(), "fulldisk", distribution="beyondagent-plugin-fulldisk", version="0.1")
    with pytest.raises(RunError) as info:
        run_spec(QUICKSTART, *SHRINK, f"run.output_dir={tmp_path / 'runs'}", "experience.name=full_disk",
                 "experience.mode=all")
    error = info.value
    assert error.message == ("training failed: experience store 'full_disk' raised OSError: [Errno 28] No space "
                             "left on device")
    assert error.where.startswith("experience (experience store 'full_disk' from beyondagent-plugin-fulldisk 0.1 "
                                  "(fulldisk)), called by backend (backend 'torch' from beyondagent-plugin-torch")
