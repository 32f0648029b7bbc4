"""The skip-or-fail rule of tests that need something a machine may lack (a venv built from the index).

Such a test is skipped with the reason on a developer's machine, but where it must run (CI: `CI`
set, as every CI service does, or the test's own `BEYONDAGENT_REQUIRE_*` variable, which .ci/run
exports) the same reason is a failure, so a check that could not run never passes as a skip.
"""

from __future__ import annotations

import os

import pytest


def required_by(variable: str) -> str | None:
    """Why the test must run here (`variable` set to 1, or a CI run), or None."""
    if os.environ.get(variable) == "1":
        return f"{variable}=1"
    if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
        return f"CI={os.environ['CI']} (a CI run)"
    return None


def skip_or_fail(reason: str, variable: str) -> None:
    """Skip the test for `reason`, or fail it where it must run (see `required_by`)."""
    why = required_by(variable)
    if why is not None:
        pytest.fail(f"{reason}; it must run where {why}")
    pytest.skip(f"{reason} (in CI this is a failure)")
