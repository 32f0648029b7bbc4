"""`max_failed_fraction` at its edge: a stage stops only past the threshold, exactly at it it warns."""

from __future__ import annotations

import pytest

from beyondagent_core.errors import RunError
from beyondagent_core.failures import FailureTally, check_failures


def tally(failed: int) -> FailureTally:
    found = FailureTally()
    for index in range(failed):
        found.add(f"task-{index}", "ValueError: broken")
    return found


def test_exactly_the_threshold_warns_and_one_more_stops() -> None:
    check_failures("rollout", tally(1), 4, 0.25, key="backend.max_failed_fraction", where="spec.yaml")
    with pytest.raises(RunError, match=r"2 of 4 failed \(50%, more than backend.max_failed_fraction = 0.25\)"):
        check_failures("rollout", tally(2), 4, 0.25, key="backend.max_failed_fraction", where="spec.yaml")
    check_failures("rollout", tally(0), 4, 0.0, key="backend.max_failed_fraction", where="spec.yaml")
