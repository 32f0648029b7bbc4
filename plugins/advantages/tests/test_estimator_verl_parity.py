"""The estimators verl also has match its `core_algos` to 1e-6 on random inputs (the script:
verl_estimator_parity.py): `grpo`, `dr_grpo`, `rloo`, `reinforce_plus_plus`, `reinforce_plus_plus_baseline`,
and `gae` (its float64 math and the estimator's float32 answer, advantages and returns).

It runs with the python of the verl plugin's venv (verl 0.9.1 pins transformers<5.11; the main env
has a newer one), built and cached by the core's venv mechanism, exactly as the torch backend's
GRPO parity test (plugins/torch/tests/test_grpo_parity.py) does: skipped with the reason where the
verl plugin is not installed or the venv cannot be built, and a failure instead in CI (`CI` set, or
BEYONDAGENT_REQUIRE_VERL_PARITY=1).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from beyondagent_core.testing.verl_parity import HOW, verl_parity_venv
from beyondagent_core.venvs import Venv

HERE = Path(__file__).resolve().parent
PARITY_TIMEOUT_S = 600


@pytest.fixture(scope="module")
def verl_venv() -> Venv:
    return verl_parity_venv("estimator verl parity test")


def test_estimators_match_verl_core_algos(verl_venv: Venv) -> None:
    print(f"estimator verl parity: {HOW}: {verl_venv.path}")
    result = subprocess.run([str(verl_venv.python), str(HERE / "verl_estimator_parity.py")], capture_output=True,
                            text=True, timeout=PARITY_TIMEOUT_S, env=verl_venv.environ(), check=False)
    lines = result.stdout.splitlines()
    mismatches = [line for line in lines if line.startswith("FAIL")]
    summary = "\n".join(lines[:1] + lines[-2:])
    print(summary)
    assert result.returncode == 0 and not mismatches, (
        f"the estimators differ from verl ({HOW}):\n" + "\n".join(mismatches[:40])
        + f"\n{summary}\n{result.stderr[-3000:]}")
    assert lines and lines[-1].endswith("0 mismatches (tolerance 1e-06)"), summary
    for name in ("dr_grpo", "rloo", "reinforce_plus_plus gamma=0.9", "reinforce_plus_plus_baseline",
                 "gae gamma=0.99 lam=0.95", "estimator float32 returns"):
        assert any(name in line for line in lines), f"no check of {name} ran"
