"""A torn last line longer than the 64 KiB block `cut_torn_tail` reads at a time is cut whole, and only
it: the records before it stay (issue 37's fifth mutation audit)."""

from __future__ import annotations

from pathlib import Path

from beyondagent_core.jsonl import append_jsonl, cut_torn_tail


def test_a_torn_line_longer_than_a_block_is_cut_and_the_records_before_it_kept(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    append_jsonl(path, [{"step": 1}, {"step": 2}])
    kept = path.stat().st_size
    with path.open("a") as handle:  # a write killed 150,000 characters into its line
        handle.write('{"text": "' + "x" * 150_000)
    assert cut_torn_tail(path) == 150_010
    assert path.read_text() == '{"step": 1}\n{"step": 2}\n' and path.stat().st_size == kept
