"""The torch backend's test helpers (`tiny_and_real`, `test_agent_workflow.trained_turns`) importable here,
whichever suite pytest collects first."""

from __future__ import annotations

import sys
from pathlib import Path

TORCH_TESTS = Path(__file__).resolve().parents[2] / "torch" / "tests"
if str(TORCH_TESTS) not in sys.path:
    sys.path.append(str(TORCH_TESTS))
