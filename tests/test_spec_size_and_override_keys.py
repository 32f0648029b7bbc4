"""Two edges of reading a spec:

- the size bound is inclusive: a spec file of exactly SPEC_MAX_BYTES bytes is read, one byte more is
  refused before it is read (test_cli_errors.py checks a much larger one through the CLI);
- an override's key is read without the spaces around it: `run.name = nightly` (as a shell
  quote leaves it) sets `run.name`, not a key named "name ".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from beyondagent_core.errors import SpecError
from beyondagent_core.spec import SPEC_MAX_BYTES, load_spec_file, parse_spec


def spec_of_size(path: Path, size: int) -> Path:
    head = b"run:\n  name: sized\n"
    path.write_bytes(head + b"#" * (size - len(head) - 1) + b"\n")
    assert path.stat().st_size == size
    return path


def test_a_spec_of_exactly_the_limit_is_read_and_one_byte_more_is_not(tmp_path: Path) -> None:
    raw = load_spec_file(spec_of_size(tmp_path / "at_limit.yaml", SPEC_MAX_BYTES))
    assert raw.data["run"]["name"] == "sized"
    with pytest.raises(SpecError, match=f"a spec file may be at most {SPEC_MAX_BYTES}"):
        load_spec_file(spec_of_size(tmp_path / "past_limit.yaml", SPEC_MAX_BYTES + 1))


def test_spaces_around_an_overrides_key_are_not_part_of_it() -> None:
    raw = parse_spec({"run": {"name": "first", "seed": 1}}, ["run.name = nightly", " run.seed=7"])
    assert raw.data["run"]["name"] == "nightly" and raw.data["run"]["seed"] == 7
    assert set(raw.data["run"]) == {"name", "seed"}
