"""A pytest plugin for scripts/test.sh: how pytest-xdist's workers share the suite.

- A test file runs whole on one worker (`--dist loadfile`: its module fixtures are built once).
- The files that take longest are handed out first: xdist hands out files in collection order
  (with `--no-loadscope-reorder`; its own order puts the files with the most tests first), and a
  long file handed out last leaves one worker running it alone at the end. `LONG_FILES` (each over
  a minute on 2 cores, measured 2026-11-28) moves them to the front, the rest keeping their order.
  A long file missing from the list only starts later than it could. verl's come first (one worker
  waits for verl's venv, the longest build: scripts/test.sh builds the venvs beside the tests),
  then the long files that need no venv (the other worker runs them while the venvs build), then
  those that need AppWorld's, BFCL's or Trinity's.
- `ONE_WORKER`: verl's test files all run on one worker, one after another. Most of them start a
  Ray cluster with verl's workers; two at once on 2 cores ran each at a fraction of its speed.
"""

from __future__ import annotations

from typing import Any

import pytest

LONG_FILES = (
    "plugins/verl/tests/test_verl_cpu_training.py",
    "plugins/verl/tests/test_agent_loop.py",
    # no venv
    "plugins/torch/tests/test_gradient_checkpointing.py",
    "plugins/torch/tests/test_model_fetch.py",
    "plugins/torch/tests/test_kv_cache.py",
    "plugins/torch/tests/test_eval_checkpoint.py",
    "plugins/torch/tests/test_resume.py",
    "plugins/torch/tests/test_real_model_examples.py",  # its bfcl.yaml case waits for BFCL's venv (~330 s)
    # a venv of their own
    "plugins/bfcl/tests/test_bfcl_agreement.py",
    "plugins/appworld/tests/test_appworld_example.py",
    "plugins/trinity/tests/test_vllm_engine.py",
    "plugins/appworld/tests/test_appworld_explore.py",
    "plugins/appworld/tests/test_appworld_run.py",
    "plugins/bfcl/tests/test_bfcl_example.py",
    "plugins/trinity/tests/test_experiences_match_torch.py",
    "plugins/trinity/tests/test_dry_run.py",
    # no venv
    "plugins/experience/tests/test_ablation_with_a_helper.py",
    "plugins/torch/tests/test_slots.py",
    "plugins/torch/tests/test_async_rollout.py",
)
ONE_WORKER = ("plugins/verl/tests/",)


def pytest_collection_modifyitems(items: list[Any]) -> None:
    rank = {path: index for index, path in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))  # stable: files stay whole


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # a hook of xdist's: none without it
def pytest_xdist_make_scheduler(config: Any, log: Any) -> Any:
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class FilesAndGroups(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return next((group for group in ONE_WORKER if path.startswith(group)), path)

    return FilesAndGroups(config, log)
