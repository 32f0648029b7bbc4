"""A pytest plugin for scripts/test.sh: the test files that take longest are run first.

pytest-xdist hands test files to its workers in collection order; a long file collected last
leaves one worker running it alone while the other waits. `LONG_FILES` (each over a minute on 2
cores, measured 2026-11-28; the longest first) moves those files to the front, everything else
keeping its order. A file missing from the list only runs later than it could.
"""

from __future__ import annotations

from typing import Any

LONG_FILES = (
    "plugins/verl/tests/test_verl_cpu_training.py",
    "plugins/verl/tests/test_verl_cpu_self_evolve.py",
    "plugins/verl/tests/test_agent_loop.py",
    "plugins/bfcl/tests/test_bfcl_agreement.py",
    "plugins/trinity/tests/test_vllm_engine.py",
    "plugins/appworld/tests/test_appworld_example.py",
    "plugins/trinity/tests/test_dry_run.py",
    "plugins/torch/tests/test_slots.py",
    "plugins/torch/tests/test_model_fetch.py",
    "plugins/torch/tests/test_real_model_examples.py",
    "plugins/torch/tests/test_resume.py",
    "plugins/torch/tests/test_async_rollout.py",
    "plugins/experience/tests/test_ablation_with_a_helper.py",
    "plugins/bfcl/tests/test_bfcl_example.py",
    "plugins/verl/tests/test_launcher.py",
)


def pytest_collection_modifyitems(items: list[Any]) -> None:
    rank = {path: index for index, path in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))  # stable: files stay whole
