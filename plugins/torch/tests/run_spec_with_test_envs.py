"""Run a spec in this process with the envs of torch_test_envs.py registered (for subprocess tests).

    python run_spec_with_test_envs.py SPEC [--resume]

Tests that must kill a run mid-way start it through this script.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from torch_test_envs import EnvsForTests  # noqa: E402

from beyondagent_core import pipeline  # noqa: E402
from beyondagent_core.plugins import PluginManager, Switches  # noqa: E402


def main(argv: list[str]) -> int:
    manager = PluginManager(Switches.from_environment())
    manager.load()
    manager.register(EnvsForTests(), name="torch-test-envs", distribution="tests", version="0")
    session = pipeline.prepare(argv[0], [a for a in argv[1:] if a != "--resume"], manager=manager)
    pipeline.run(session, resume="--resume" in argv)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
