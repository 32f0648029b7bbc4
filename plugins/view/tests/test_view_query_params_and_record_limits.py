"""The viewer's query parameters, filters and record checks (queries.py, records.py, bounds.py), class-wide.

- `ListQuery.from_params`: every parameter's accepted forms and its nearest ignored one (a flag other than
  0/1, an unknown sort, a non-number), text cut at 500 characters, page and per_page clamped exactly at
  their limits, numbers on and one past sqlite's 64 bits; `params` leaves the defaults out.
- `list_episodes` on a real index of a run written by the record writer: each filter alone against a count
  worked out from what was written (steps inclusive at both ends, error also matching bad lines, search with
  and without FTS5), sorting with the row id as the tie-break in both directions, paging, `group_rows`'
  order and limit, `choices` and `summary`.
- `parse_line`/`check_tokens`: every refusal next to the nearest accepted record (nesting exactly at
  MAX_DEPTH, MAX_TOKENS positions, as many log-probs as positions, a prompt length at the end, advantages
  covering every position); `token_window`, `row_values`, `finite`, `text` and `search_text` at their cuts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from beyondagent_plugin_view import index as index_module
from beyondagent_plugin_view.bounds import (
    INT64_MAX,
    INT64_MIN,
    MAX_DEPTH,
    MAX_FIELD_CHARS,
    MAX_GROUP_SHOWN,
    MAX_TOKEN_TEXT,
    MAX_TOKENS,
    check_int64,
    int64,
    is_int64,
)
from beyondagent_plugin_view.index import EpisodeIndex
from beyondagent_plugin_view.queries import (
    MAX_PAGE,
    MAX_PER_PAGE,
    PER_PAGE,
    ListQuery,
    choices,
    group_rows,
    list_episodes,
    summary,
)
from beyondagent_plugin_view.records import (
    FTS_MAX_CHARS,
    BadRecord,
    check_tokens,
    finite,
    parse_line,
    row_values,
    search_text,
    text,
    token_window,
)
from view_run_factory import GROUP_SIZE, make_run, record

from beyondagent_core.episode_records import EPISODES_FILE
from beyondagent_core.jsonl import append_jsonl

# --- ListQuery.from_params --------------------------------------------------------------------------------


@pytest.mark.parametrize(("params", "field", "expected"), [
    ({"split": "  val "}, "split", "val"),
    ({"task": "t" * 600}, "task", "t" * 500),
    ({"step_min": " 3 "}, "step_min", 3),
    ({"step_min": "three"}, "step_min", None),
    ({"step_max": "-2"}, "step_max", -2),
    ({"step_max": str(INT64_MAX)}, "step_max", INT64_MAX),
    ({"step_min": str(INT64_MIN)}, "step_min", INT64_MIN),
    ({"success": "1"}, "success", "1"), ({"success": "0"}, "success", "0"), ({"success": "true"}, "success", ""),
    ({"error": "1"}, "error", "1"), ({"error": "2"}, "error", ""),
    ({"guided": "0"}, "guided", "0"), ({"guided": "yes"}, "guided", ""),
    ({"sort": "score"}, "sort", "score"), ({"sort": "id; DROP"}, "sort", "line"),
    ({"desc": "1"}, "desc", True), ({"desc": "true"}, "desc", False),
    ({"page": "0"}, "page", 1), ({"page": "-5"}, "page", 1), ({"page": "x"}, "page", 1), ({"page": "7"}, "page", 7),
    ({"page": str(MAX_PAGE)}, "page", MAX_PAGE), ({"page": str(MAX_PAGE + 1)}, "page", MAX_PAGE),
    ({"per_page": str(MAX_PER_PAGE)}, "per_page", MAX_PER_PAGE),
    ({"per_page": str(MAX_PER_PAGE + 1)}, "per_page", MAX_PER_PAGE),
    ({"per_page": "500"}, "per_page", 500), ({"per_page": "501"}, "per_page", 500),
    ({"per_page": "1"}, "per_page", 1), ({"per_page": "-3"}, "per_page", 1),
    ({"per_page": "0"}, "per_page", PER_PAGE), ({"per_page": "many"}, "per_page", PER_PAGE),
    ({}, "per_page", 50),
], ids=lambda value: str(value)[:40])
def test_each_parameter_form_and_its_nearest_ignored_one(params: dict[str, str], field: str, expected: Any) -> None:
    assert getattr(ListQuery.from_params(params), field) == expected


@pytest.mark.parametrize("key", ["step_min", "step_max", "page", "per_page"])
def test_a_number_one_past_64_bits_is_refused_naming_the_parameter(key: str) -> None:
    for number in (INT64_MAX + 1, INT64_MIN - 1):
        with pytest.raises(ValueError, match=f"\\?{key}= is out of range"):
            ListQuery.from_params({key: str(number)})


def test_params_leaves_the_defaults_out_and_applies_changes() -> None:
    query = ListQuery.from_params({"split": "train", "desc": "1", "page": "3", "success": "0", "per_page": "50"})
    assert query.params() == {"split": "train", "desc": "1", "page": "3", "success": "0"}
    assert query.params(page=1, desc=False) == {"split": "train", "success": "0"}
    assert ListQuery().params() == {} and ListQuery(step_min=0).params() == {"step_min": "0"}


def test_the_64_bit_checks_on_and_past_their_limits() -> None:
    assert check_int64(INT64_MAX, "x") == INT64_MAX and check_int64(INT64_MIN, "x") == INT64_MIN
    for past in (INT64_MAX + 1, INT64_MIN - 1):
        with pytest.raises(ValueError, match="x is out of range"):
            check_int64(past, "x")
    assert int64(" 12 ", "n") == 12
    with pytest.raises(ValueError, match="n must be an integer, got '1.5'"):
        int64("1.5", "n")
    assert is_int64(INT64_MAX) and not is_int64(INT64_MAX + 1) and not is_int64(True) and not is_int64(1.0)


# --- filters, sorting and paging on a real index ------------------------------------------------------------


def extra_records() -> list[dict[str, Any]]:
    """Step 4: a val episode, a synthetic one, a guided one, one that failed to run, and one of step 5."""
    return [record(4, 0, split="val", answer="north"), record(4, 1, origin="synthetic"),
            record(4, 2, guided=True), record(4, 3, error="env crashed: boom"), record(5, 0, success=True)]


def built_index(run_dir: Path) -> EpisodeIndex:
    make_run(run_dir)  # steps 1-3: two groups of four each, successes at index 0 and at index == step
    append_jsonl(run_dir / EPISODES_FILE, extra_records())
    with (run_dir / EPISODES_FILE).open("a") as handle:
        handle.write("{not json\n")
    index = EpisodeIndex(run_dir, min_interval_s=0)
    assert index.refresh(force=True) == 24 + 5 + 1
    return index


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Any:
    built = built_index(tmp_path_factory.mktemp("view") / "run")
    yield built
    built.close()


def count(index: EpisodeIndex, **params: Any) -> int:
    return list_episodes(index, ListQuery.from_params({k: str(v) for k, v in params.items()}))[1]


@pytest.mark.parametrize(("params", "expected"), [
    ({}, 30),
    ({"step_min": 3}, 8 + 4 + 1),  # from step 3 on, step 3 included
    ({"step_max": 1}, 8),  # up to step 1, step 1 included
    ({"step_min": 2, "step_max": 2}, 8),
    ({"step_min": 5, "step_max": 4}, 0),
    ({"split": "val"}, 1), ({"split": "train"}, 28),
    ({"origin": "synthetic"}, 1), ({"task": "lake-2-1"}, GROUP_SIZE), ({"group": "1"}, 3 * GROUP_SIZE),
    ({"success": 1}, 6 + 1), ({"success": 0}, 30 - 7 - 1),  # a bad line has no columns: in neither
    ({"guided": 1}, 1), ({"guided": 0}, 30 - 1 - 1),
    ({"error": 1}, 2),  # the episode that failed and the bad line
    ({"error": 0}, 28),
    ({"q": "north"}, 1), ({"q": "Action north"}, 1), ({"q": "north down"}, 0), ({"q": "!!"}, 30),
    ({"q": "boom"}, 1),  # the error text is searched too
])
def test_each_filter_alone_counts_what_was_written(index: EpisodeIndex, params: dict[str, Any], expected: int) -> None:
    assert count(index, **params) == expected


def test_search_without_fts5_matches_the_text_as_typed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index_module, "has_fts5", lambda: False)
    plain = built_index(tmp_path / "plain")
    try:
        assert not plain.fts
        assert count(plain, q="north") == 1 and count(plain, q="Action: north") == 1
        assert count(plain, q="Action north") == 0  # a substring, not words
        assert count(plain, q="!!") == 0
    finally:
        plain.close()


def test_sorting_breaks_ties_by_row_in_the_same_direction_and_pages_follow(index: EpisodeIndex) -> None:
    def lines(**params: Any) -> list[int]:
        rows, _ = list_episodes(index, ListQuery.from_params({k: str(v) for k, v in params.items()}))
        return [row["line"] for row in rows]

    wins = [1, 2, 9, 11, 17, 20, 29]  # index 0 and index == step of steps 1-3 (8 lines a step), and step 5's
    assert lines(sort="score", desc=1, per_page=7) == sorted(wins, reverse=True)
    assert lines(sort="score", per_page=500)[-7:] == wins  # ascending: the wins last, in line order
    assert lines(desc=1, per_page=3) == [30, 29, 28] and lines(per_page=3, page=2) == [4, 5, 6]
    assert lines(per_page=7, page=5) == [29, 30] and lines(per_page=7, page=6) == []
    assert lines(sort="step", desc=1, per_page=2) == [29, 28]
    rows, total = list_episodes(index, ListQuery(per_page=1))
    assert total == 30 and set(rows[0]) == {"id", "line", "step", "split", "idx", "grp", "task_id", "origin", "score",
                                            "success", "turns", "tokens", "trained", "error", "guided", "bad"}


def test_group_rows_are_in_index_order_up_to_their_limit(index: EpisodeIndex) -> None:
    rows = group_rows(index, 2, "train", "1")
    assert [row["idx"] for row in rows] == [4, 5, 6, 7] and {row["grp"] for row in rows} == {"1"}
    assert [row["idx"] for row in group_rows(index, 2, "train", "1", limit=2)] == [4, 5]
    assert group_rows(index, 2, "val", "1") == []
    assert group_rows.__defaults__ == (MAX_GROUP_SHOWN + 1,)  # one more than a page shows: "there are more"


def test_choices_and_summary(index: EpisodeIndex) -> None:
    assert choices(index) == {"split": ["train", "val"], "origin": ["original", "synthetic"]}
    got = summary(index)
    assert (got["episodes"], got["bad_lines"], got["first_step"], got["last_step"]) == (30, 1, 1, 5)


# --- records: each refusal next to the nearest accepted line -----------------------------------------------


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth - 1):
        value = [value]
    return value


def test_nesting_exactly_at_the_limit_is_shown_one_deeper_is_a_bad_record() -> None:
    base = {"step": 1, "task_id": "t", "turns": []}
    # the record object is level 1: its field holds MAX_DEPTH - 1 more levels
    assert parse_line(json.dumps({**base, "details": nested(MAX_DEPTH)}).encode())["details"] == nested(MAX_DEPTH)
    with pytest.raises(BadRecord, match=f"nested deeper than {MAX_DEPTH} levels"):
        parse_line(json.dumps({**base, "details": nested(MAX_DEPTH + 1)}).encode())
    with pytest.raises(BadRecord, match="a JSON list, not an object"):
        parse_line(b"[1, 2]")
    with pytest.raises(BadRecord, match="not JSON"):
        parse_line(b"\xff\xfe")


def block(**fields: Any) -> dict[str, Any]:
    return {"ids": [5, 6, 7, 8], "mask": [1, 3], "vocab": {"5": "a"}, "logprobs": [-0.1, -0.2, -0.3], **fields}


@pytest.mark.parametrize(("fields", "refusal"), [
    ({}, None),
    ({"ids": "5678"}, "must be lists"), ({"vocab": ["a"]}, "must be lists"),
    ({"ids": [5, 6, 7, 8.0]}, "must hold token ids"), ({"vocab": {"5": 1}}, "must hold token ids"),
    ({"ids": ["5", 6, 7, 8]}, None),
    ({"mask": [1, -1, 4]}, r"tokens.mask\[1\] is -1, not a count"),
    ({"mask": [1, True, 2]}, r"tokens.mask\[1\] is True"),
    ({"mask": [0, INT64_MAX + 1]}, "an integer of 64 bits, not a count"),
    ({"mask": [1, 4]}, "claims 5 positions but tokens.ids has 4"),
    ({"logprobs": [-0.1, -0.2, -0.3, -0.4]}, None),  # one per position: the most
    ({"logprobs": [-0.1] * 5}, "at most one per position"),
    ({"logprobs": [-0.1, True]}, "a list of numbers"),
    ({"logprobs": [None, 1]}, None),
    ({"advantages": [[0.5, 1], [1.5, 3]]}, None),
    ({"advantages": [[0.5, 4], [1.5, 1]]}, "covers 5 positions, tokens.ids has 4"),
    ({"advantages": [[0.5, 1], [1.5, 2]]}, "covers 3 positions, tokens.ids has 4"),
    ({"advantages": [[0.5, 4, 1]]}, r"\[value, count\] runs"),
    ({"advantages": [["x", 4]]}, r"\[value, count\] runs"),
    ({"advantages": [[0.5, -4], [1, 8]]}, r"\[value, count\] runs"),
    ({"prompt_length": 4}, None), ({"prompt_length": 0}, None),
    ({"prompt_length": 5}, "tokens.prompt_length is 5, not a position"),
    ({"prompt_length": -1}, "tokens.prompt_length is -1"),
    ({"prompt_length": True}, "tokens.prompt_length is True"),
], ids=lambda value: str(value)[:50])
def test_each_token_block_refusal_next_to_its_nearest_accepted_form(fields: dict[str, Any], refusal: str | None) -> None:
    if refusal is None:
        check_tokens(block(**fields))
    else:
        with pytest.raises(BadRecord, match=refusal):
            check_tokens(block(**fields))


def test_max_tokens_positions_are_shown_one_more_is_a_bad_record() -> None:
    check_tokens({"ids": [1] * MAX_TOKENS, "mask": [MAX_TOKENS]})
    with pytest.raises(BadRecord, match=f"claims {MAX_TOKENS + 1} positions, more than the limit of {MAX_TOKENS}"):
        check_tokens({"ids": [1] * (MAX_TOKENS + 1), "mask": [MAX_TOKENS + 1]})
    check_tokens(None)
    check_tokens({"ids": [], "mask": []})


def test_a_token_window_cuts_each_text_and_stops_at_the_block() -> None:
    piece = "x" * (MAX_TOKEN_TEXT + 1)
    record = {"tokens": {"ids": [1, 2, 3], "mask": [1, 2], "vocab": {"1": piece, "2": "y" * MAX_TOKEN_TEXT},
                         "logprobs": [-1.0, -2.0], "advantages": [[0.0, 1], [0.5, 2]]}}
    rows, total = token_window(record, 0, 10)
    assert total == 3 and [len(row["text"]) for row in rows] == [MAX_TOKEN_TEXT, MAX_TOKEN_TEXT, 1]
    assert rows[2]["text"] == "\ufffd" and [row["advantage"] for row in rows] == [0.0, 0.5, 0.5]
    assert [row["logprob"] for row in rows] == [None, -1.0, -2.0]
    assert token_window(record, 3, 10) == ([], 3) and token_window({"tokens": None}) == ([], 0)
    no_advantages = {"tokens": {**record["tokens"], "advantages": None}}
    assert [row["advantage"] for row in token_window(no_advantages, 1, 1)[0]] == [None]


def test_row_values_of_a_record_and_their_cuts() -> None:
    row = row_values({"step": 3, "index": 2, "group": 1, "task_id": "t" * (MAX_FIELD_CHARS + 1), "split": "s\ud800",
                      "success": 1, "turns": [{}, {}], "tokens": {"mask": [2, 3, 1, 4]}, "guided": "yes",
                      "score": 10**400, "error": None, "origin": MAX_FIELD_CHARS * "o"})
    assert row == {"step": 3, "split": "s\ufffd", "idx": 2, "grp": "1", "task_id": "t" * MAX_FIELD_CHARS,
                   "origin": "o" * MAX_FIELD_CHARS, "score": None, "success": 1, "turns": 2, "tokens": 10,
                   "trained": 7, "error": None, "guided": 1}
    odd = row_values({"step": True, "index": 1.0, "turns": "many", "tokens": "none", "success": 0})
    assert (odd["step"], odd["idx"], odd["turns"], odd["tokens"], odd["trained"], odd["success"]) == (
        None, None, 0, 0, 0, 0)
    assert row_values({"step": INT64_MAX})["step"] == INT64_MAX
    for key in ("step", "index"):
        with pytest.raises(BadRecord, match=f"{key} is an integer of 64 bits, beyond the 64-bit integers"):
            row_values({key: INT64_MAX + 1})


@pytest.mark.parametrize(("value", "expected"), [
    (0.5, 0.5), (float("nan"), None), (float("inf"), None), (3, 3.0), (10**400, None), (True, None), ("3", None),
    (None, None),
])
def test_finite_scores(value: Any, expected: float | None) -> None:
    assert finite(value) == expected


def test_search_text_and_text_cuts() -> None:
    record = {"task_id": "t1", "reason": "fell", "error": None,
              "turns": [{"content": "hello"}, "not a turn", {"content": None}, {"content": "x" * FTS_MAX_CHARS}]}
    found = search_text(record)
    assert found.startswith("t1\nfell\nhello\nxx") and len(found) == FTS_MAX_CHARS
    deep = search_text({"turns": [{"content": "x" * 19_000 + " needle"}]})  # 20,000 characters are searched
    assert deep.endswith(" needle")
    assert text(None) is None and text(12) == "12" and text("abc", limit=2) == "ab"
