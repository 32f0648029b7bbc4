"""grpo.py matches verl's `core_algos` to 1e-6 on random inputs (the script: verl_parity.py).

How it runs: with the python of the `verl` venv that beyondagent-plugin-verl registers (verl 0.9.1 pins
transformers<5.11 and our main env has transformers 5.23), built and cached by the core's venv mechanism
(`beyondagent_core.venvs`; `beyondagent venv build verl` builds it ahead of time, a few minutes the first
time). The same venv runs the verl backend, so CI builds it once. Without the verl plugin installed the test is
skipped with that reason; where the package index cannot be reached it is skipped too. In CI it never
skips: there (`CI` set, as every CI service does, or BEYONDAGENT_REQUIRE_VERL_PARITY=1, which .ci/run
exports) either reason is a failure, so a parity check that could not run never passes as a skip.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from beyondagent_core.testing.verl_parity import HOW, cannot_run, verl_parity_venv
from beyondagent_core.venvs import Venv

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
PARITY_TIMEOUT_S = 600


@pytest.fixture(scope="module")
def verl_venv() -> Venv:
    return verl_parity_venv("verl parity test")


def test_grpo_matches_verl_core_algos(verl_venv: Venv) -> None:
    print(f"verl parity: {HOW}: {verl_venv.path}")
    grpo = REPO / "plugins" / "torch" / "beyondagent_plugin_torch" / "grpo.py"
    result = subprocess.run([str(verl_venv.python), str(HERE / "verl_parity.py"), str(grpo)], capture_output=True,
                            text=True, timeout=PARITY_TIMEOUT_S, env=verl_venv.environ(), check=False)
    lines = result.stdout.splitlines()
    mismatches = [line for line in lines if line.startswith("FAIL")]
    summary = "\n".join(lines[:1] + lines[-2:])
    print(summary)
    assert result.returncode == 0 and not mismatches, (
        f"grpo.py differs from verl ({HOW}):\n" + "\n".join(mismatches[:40]) + f"\n{summary}\n{result.stderr[-3000:]}")
    assert lines and lines[-1].endswith("0 mismatches (tolerance 1e-06)"), summary


@pytest.mark.parametrize("environment", [{"CI": "true"}, {"CI": "1"}, {"BEYONDAGENT_REQUIRE_VERL_PARITY": "1"}])
def test_in_ci_a_parity_test_that_cannot_run_fails(monkeypatch: pytest.MonkeyPatch,
                                                    environment: dict[str, str]) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("BEYONDAGENT_REQUIRE_VERL_PARITY", raising=False)
    for key, value in environment.items():
        monkeypatch.setenv(key, value)
    outcome: BaseException | None = None
    try:
        cannot_run("no verl venv")
    except BaseException as exc:  # noqa: BLE001 - pytest's skip and fail outcomes are BaseExceptions
        outcome = exc
    assert isinstance(outcome, pytest.fail.Exception), f"{environment}: {type(outcome).__name__}"


def test_outside_ci_it_skips_and_ci_requires_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "false")
    monkeypatch.delenv("BEYONDAGENT_REQUIRE_VERL_PARITY", raising=False)
    with pytest.raises(pytest.skip.Exception, match="in CI this is a failure"):
        cannot_run("no verl venv")
    # CI's entry point requires it even where the CI service sets no `CI` variable.
    ci_script = (REPO / ".ci" / "run").read_text()
    assert "export BEYONDAGENT_REQUIRE_VERL_PARITY=1" in ci_script
    assert ci_script.index("BEYONDAGENT_REQUIRE_VERL_PARITY") < ci_script.index("scripts/test.sh")
