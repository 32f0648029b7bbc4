"""The env contract's `inline_calls` check (audit 7): only a real bool passes.

`LocalAsyncEnv.inline` runs calls on the event loop when `inline_calls is True`, so an env that says
`inline_calls = 1` (an int, truthy, equal to True) would silently keep its calls in threads: the
contract must refuse it, as it refuses a string, while True, False and no attribute at all pass.
"""

from __future__ import annotations

import pytest

from beyondagent_core.envs.local import LocalAsyncEnv
from beyondagent_core.testing.contracts import EnvContract


class Quiet:
    def close(self) -> None:
        pass


def quick(value: object) -> Quiet:
    env = Quiet()
    env.inline_calls = value  # type: ignore[attr-defined]
    return env


@pytest.mark.parametrize("make_env", [Quiet, lambda: quick(True), lambda: quick(False)],
                         ids=["absent", "True", "False"])
def test_a_bool_or_no_inline_calls_passes_the_contract(make_env) -> None:
    EnvContract().test_says_whether_its_calls_are_quick_with_a_bool(make_env)


@pytest.mark.parametrize("value", [1, 0, "yes", None], ids=["one", "zero", "string", "none"])
def test_anything_but_a_bool_fails_the_contract(value) -> None:
    with pytest.raises(AssertionError, match="inline_calls is"):
        EnvContract().test_says_whether_its_calls_are_quick_with_a_bool(lambda: quick(value))
    # what the contract guards against: such an env is not run on the loop, whatever it meant
    assert not LocalAsyncEnv(quick(value)).inline
