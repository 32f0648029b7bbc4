"""The dropped-episode counting rule (beyondagent_core/advantages.py `dropped_counts`)."""

from __future__ import annotations

from beyondagent_core.advantages import dropped_counts


def test_an_unknown_failure_reason_is_counted_as_an_error_and_finished_episodes_not_at_all() -> None:
    got = dropped_counts(["error", "no-such-reason", None, "timeout", "split", None], skipped_groups=1)
    assert got == {"dropped_episodes": 4.0, "dropped_groups": 1.0, "dropped_error": 2.0, "dropped_timeout": 1.0,
                   "dropped_split": 1.0, "dropped_untrainable": 0.0}
    assert dropped_counts([None, None], skipped_groups=0) == {
        "dropped_episodes": 0.0, "dropped_groups": 0.0, "dropped_error": 0.0, "dropped_timeout": 0.0,
        "dropped_split": 0.0, "dropped_untrainable": 0.0}
