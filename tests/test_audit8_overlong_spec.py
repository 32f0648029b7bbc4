"""`algorithm.overlong.max_len` must be above `buffer_len`, and the refusal names `max_len`.

From the eighth audit: a mutant that made the refusal name `algorithm.overlong.buffer_len` (the key
that is fine) passed every spec test. Checked on both sides of the edge: max_len equal to or below
buffer_len is refused, one above it is accepted, each value reaching the section as written.
"""

from __future__ import annotations

import pytest

from beyondagent_core.errors import SpecError
from beyondagent_core.spec import AlgorithmSection, structured


def algorithm(**overlong: int) -> AlgorithmSection:
    return structured(AlgorithmSection, {"overlong": overlong}, "algorithm", "spec.yaml")


@pytest.mark.parametrize("max_len", [8, 3])
def test_a_max_len_not_above_buffer_len_is_refused_naming_max_len(max_len: int) -> None:
    with pytest.raises(SpecError) as caught:
        algorithm(buffer_len=8, max_len=max_len)
    assert caught.value.where == "spec.yaml, key algorithm.overlong.max_len"
    assert caught.value.message == (f"algorithm.overlong.max_len must be > algorithm.overlong.buffer_len (8), "
                                    f"got {max_len}")
    assert caught.value.hint.startswith("set algorithm.overlong.max_len to a value in range")


def test_a_max_len_above_buffer_len_is_kept_as_written() -> None:
    section = algorithm(buffer_len=8, max_len=9, penalty_factor=3)
    assert (section.overlong.buffer_len, section.overlong.max_len, section.overlong.penalty_factor) == (8, 9, 3.0)
    assert algorithm(buffer_len=8).overlong.max_len is None  # unset: the backend's response limit
