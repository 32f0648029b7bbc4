"""The viewer's search words and token windows (audit 7), with hand-computed expectations.

`fts_query` makes every word of the search box a quoted FTS5 term that must occur (AND, not OR). A token
window that starts inside a run of trained tokens shows each trained token with its own log-prob: the
log-probs list holds only mask-1 positions, so the window's first log-prob is found by counting the trained
positions before `start`, not whole runs.
"""

from __future__ import annotations

from beyondagent_plugin_view.queries import fts_query
from beyondagent_plugin_view.records import token_window


def test_every_search_word_must_occur_and_none_is_an_operator() -> None:
    assert fts_query("left up") == '"left" AND "up"'
    assert fts_query("NOT  frozen-lake OR") == '"NOT" AND "frozen" AND "lake" AND "OR"'
    assert fts_query("  ") == ""


def record() -> dict:
    # mask runs alternate 0, 1, 0, 1: positions 0-1 context, 2-4 trained, 5 context, 6-7 trained
    return {"tokens": {"ids": [10, 11, 12, 13, 14, 15, 16, 17], "vocab": {str(i): f"t{i}" for i in range(10, 18)},
                       "mask": [2, 3, 1, 2], "logprobs": [-0.1, -0.2, -0.3, -0.4, -0.5]}}


def test_a_window_starting_inside_a_trained_run_gives_each_token_its_own_log_prob() -> None:
    rows, total = token_window(record(), start=3, limit=4)
    assert total == 8
    assert [(r["id"], r["text"], r["mask"], r["logprob"]) for r in rows] == [
        (13, "t13", 1, -0.2), (14, "t14", 1, -0.3), (15, "t15", 0, None), (16, "t16", 1, -0.4)]
    rows, _ = token_window(record(), start=7, limit=10)
    assert [(r["id"], r["logprob"]) for r in rows] == [(17, -0.5)]
    rows, _ = token_window(record(), start=0, limit=3)
    assert [(r["mask"], r["logprob"]) for r in rows] == [(0, None), (0, None), (1, -0.1)]
