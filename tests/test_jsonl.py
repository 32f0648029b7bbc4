"""JSON-lines files: bad-line policies with file:line errors, atomic writes, appends."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from beyondagent_core.errors import DataError
from beyondagent_core.jsonl import (
    BadRecords,
    append_jsonl,
    check_policy,
    json_lines,
    read_jsonl,
    read_tasks,
    write_jsonl,
    write_tasks,
)
from beyondagent_core.types import Reward, Task

TASKS = [
    Task(task_id="t1", query="1 + 1?", ground_truth="2"),
    Task(task_id="t2", query="Ünïcode question — 你好?", ground_truth=["a", "b"], metadata={"k": {"nested": 1}}),
    Task(task_id="s1", query="derived", origin="synthetic", seed_task_id="t1", confidence=0.5),
]


def write_lines(path: Path, *lines: str) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def task_line(task_id: str, **fields) -> str:
    return json.dumps(Task(task_id=task_id, **fields).to_dict())


@pytest.fixture
def mixed_file(tmp_path: Path) -> Path:
    """Lines 1, 3 and 6 are good; 2 is not JSON, 4 is blank, 5 has an unknown field."""
    return write_lines(
        tmp_path / "tasks.jsonl",
        task_line("a"),
        '{"task_id": "b", ',
        task_line("c"),
        "",
        json.dumps({"task_id": "d", "promt": "typo"}),
        task_line("e"),
    )


# --- reading and bad lines ------------------------------------------------------------------


def test_write_then_read_tasks_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "out" / "tasks.jsonl"
    assert write_tasks(path, TASKS) == 3
    assert read_tasks(path) == TASKS
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3
    assert all(json.loads(line)["schema_version"] == 1 for line in lines)
    assert "你好" in lines[1], "non-ASCII text is written as is, not escaped"


def test_fail_policy_raises_with_file_and_line(mixed_file: Path) -> None:
    with pytest.raises(DataError) as info:
        read_tasks(mixed_file)
    error = info.value
    assert error.where == f"{mixed_file}:2"
    assert f"{mixed_file}:2" in str(error)
    assert "not valid JSON" in str(error)
    assert "--on-bad-record=skip" in str(error)


def test_fail_policy_names_the_unknown_field_and_its_line(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "tasks.jsonl", task_line("a"), task_line("b"),
                       json.dumps({"task_id": "c", "promt": "typo"}))
    with pytest.raises(DataError) as info:
        read_tasks(path, BadRecords("fail"))
    assert f"{path}:3" in str(info.value)
    assert "promt" in str(info.value)


def test_fail_policy_names_a_missing_task_id(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "tasks.jsonl", json.dumps({"query": "no id"}))
    with pytest.raises(DataError, match="task_id") as info:
        read_tasks(path)
    assert f"{path}:1" in str(info.value)


def test_skip_policy_counts_keeps_examples_and_logs(mixed_file: Path) -> None:
    bad = BadRecords("skip")
    with capture_logs() as events:
        tasks = read_tasks(mixed_file, bad)
    assert [task.task_id for task in tasks] == ["a", "c", "e"]
    assert bad.count == 2
    assert len(bad.examples) == 2
    assert bad.examples[0].startswith(f"{mixed_file}:2: not valid JSON")
    assert bad.examples[1].startswith(f"{mixed_file}:5: ")
    assert "promt" in bad.examples[1]

    bad_events = [event for event in events if event["event"] == "data.bad_record"]
    assert [event["where"] for event in bad_events] == [f"{mixed_file}:2", f"{mixed_file}:5"]
    assert [event["skipped_so_far"] for event in bad_events] == [1, 2]
    assert all(event["log_level"] == "warning" for event in bad_events)
    assert "promt" in bad_events[1]["reason"]


def test_skip_policy_keeps_only_the_first_five_examples_but_counts_all(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "tasks.jsonl", *(["not json"] * 8), task_line("ok"))
    bad = BadRecords("skip")
    with capture_logs() as events:
        tasks = read_tasks(path, bad)
    assert [task.task_id for task in tasks] == ["ok"]
    assert bad.count == 8
    assert [example.split(": ")[0] for example in bad.examples] == [f"{path}:{n}" for n in range(1, 6)]
    assert len([event for event in events if event["event"] == "data.bad_record"]) == 8


def test_one_tally_accumulates_over_several_files(tmp_path: Path) -> None:
    bad = BadRecords("skip")
    first = write_lines(tmp_path / "a.jsonl", "[1, 2", task_line("a"))
    second = write_lines(tmp_path / "b.jsonl", task_line("b"), "{}")
    assert len(read_tasks(first, bad)) == 1
    assert len(read_tasks(second, bad)) == 1
    assert bad.count == 2
    assert bad.examples[0].startswith(f"{first}:1")
    assert bad.examples[1].startswith(f"{second}:2")


def test_non_object_json_line_is_a_bad_record(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "tasks.jsonl", '["t1"]')
    with pytest.raises(DataError, match="must be a JSON object") as info:
        read_tasks(path)
    assert f"{path}:1" in str(info.value)


def test_blank_and_whitespace_lines_are_ignored_and_line_numbers_stay_true(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n" + task_line("a") + "\n   \n\t\n" + task_line("b") + "\n\n" + "oops\n", encoding="utf-8")
    bad = BadRecords("skip")
    assert [task.task_id for task in read_tasks(path, bad)] == ["a", "b"]
    assert bad.count == 1
    assert bad.examples[0].startswith(f"{path}:7:")


def test_file_without_trailing_newline_reads_its_last_line(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text(task_line("a") + "\n" + task_line("b"), encoding="utf-8")
    assert [task.task_id for task in read_tasks(path)] == ["a", "b"]


def test_missing_file_is_a_data_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "tasks.jsonl"
    with pytest.raises(DataError, match="file not found") as info:
        read_tasks(missing)
    assert str(missing) in str(info.value)
    assert info.value.hint


def test_a_directory_is_not_a_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="file not found"):
        read_tasks(tmp_path)


def test_read_jsonl_with_another_parser(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "rewards.jsonl", json.dumps(Reward(score=0.5).to_dict()), json.dumps({"score": "high"}))
    bad = BadRecords("skip")
    assert list(read_jsonl(path, Reward.from_dict, bad)) == [Reward(score=0.5)]
    assert bad.count == 1
    assert bad.examples[0].startswith(f"{path}:2:")


def test_check_policy() -> None:
    assert check_policy("fail") == "fail"
    assert check_policy("skip") == "skip"
    with pytest.raises(DataError, match="unknown bad-record policy 'ignore'") as info:
        check_policy("ignore")
    assert "fail, skip" in str(info.value)


# --- writing ---------------------------------------------------------------------------------


def leftovers(directory: Path, keep: set[str]) -> list[str]:
    return sorted(path.name for path in directory.iterdir() if path.name not in keep)


def test_write_jsonl_leaves_no_temporary_files(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    write_jsonl(path, TASKS)
    write_jsonl(path, TASKS[:1])
    assert leftovers(tmp_path, {"tasks.jsonl"}) == []
    assert read_tasks(path) == TASKS[:1]


def test_write_jsonl_keeps_the_original_when_records_fail_midway(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    write_jsonl(path, TASKS)
    before = path.read_bytes()

    def records() -> Iterator[Task]:
        yield Task(task_id="new-1")
        yield Task(task_id="new-2")
        raise RuntimeError("the summarizer crashed")

    with pytest.raises(RuntimeError, match="summarizer crashed"):
        write_jsonl(path, records())
    assert path.read_bytes() == before
    assert leftovers(tmp_path, {"tasks.jsonl"}) == []


def test_write_jsonl_creates_nothing_when_the_first_write_fails(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "tasks.jsonl"

    def records() -> Iterator[Task]:
        raise KeyboardInterrupt
        yield  # pragma: no cover

    with pytest.raises(KeyboardInterrupt):
        write_jsonl(path, records())
    assert not path.exists()
    assert leftovers(path.parent, set()) == []


def test_write_jsonl_accepts_plain_dicts_and_counts(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    assert write_jsonl(path, [{"a": 1}, {"b": [1, 2]}, Reward(score=1.0)]) == 3
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert rows[:2] == [{"a": 1}, {"b": [1, 2]}]
    assert Reward.from_dict(rows[2]) == Reward(score=1.0)


def test_write_jsonl_of_nothing_writes_an_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    assert write_jsonl(path, []) == 0
    assert path.read_text(encoding="utf-8") == ""
    assert read_tasks(path) == []


def test_append_jsonl_appends_to_what_is_there(tmp_path: Path) -> None:
    path = tmp_path / "cache" / "synthetic.jsonl"
    append_jsonl(path, TASKS[:1])
    append_jsonl(path, [])
    append_jsonl(path, TASKS[1:])
    assert read_tasks(path) == TASKS
    assert len(path.read_text(encoding="utf-8").splitlines()) == 3


def test_append_after_write_keeps_earlier_records(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    write_tasks(path, TASKS[:2])
    append_jsonl(path, [TASKS[2]])
    assert read_tasks(path) == TASKS


def test_invalid_utf8_costs_one_line_with_its_number(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_bytes((task_line("a") + "\n").encode() + b'{"task_id": "b\xff"}\n' + (task_line("c") + "\n").encode())
    with pytest.raises(DataError) as info:
        read_tasks(path)
    assert f"{path}:2" in str(info.value) and "not UTF-8 text (byte 15 of the line is 0xff)" in str(info.value)
    bad = BadRecords("skip")
    assert [task.task_id for task in read_tasks(path, bad)] == ["a", "c"] and bad.count == 1


def test_a_byte_order_mark_on_line_one_is_not_an_error(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + (task_line("a") + "\n" + task_line("b") + "\n").encode())
    assert [task.task_id for task in read_tasks(path)] == ["a", "b"]


@pytest.mark.parametrize(("fields", "reason"), [
    ({"query": ["x"]}, "query must be a string or null, got list ['x']"),
    ({"query": 3}, "query must be a string or null, got int 3"),
    ({"env": {"name": "x"}}, "env must be a string or null"),
    ({"judge": 1}, "judge must be a string or null"),
    ({"metadata": [1, 2]}, "metadata must be an object, got list [1, 2]"),
    ({"open_query": "yes"}, "open_query must be true or false, got 'yes'"),
    ({"confidence": "high"}, "confidence must be a number or null, got 'high'"),
    ({"confidence": True}, "confidence must be a number or null, got True"),
    ({"task_id": 7}, "task_id must be a non-empty string, got 7"),
])
def test_wrong_field_types_are_refused_not_coerced(tmp_path: Path, fields: dict, reason: str) -> None:
    path = write_lines(tmp_path / "tasks.jsonl", task_line("ok"), json.dumps({"task_id": "t", **fields}))
    with pytest.raises(DataError) as info:
        read_tasks(path)
    assert f"{path}:2" in str(info.value) and reason in str(info.value)


def test_duplicate_task_ids_name_both_lines(tmp_path: Path) -> None:
    from beyondagent_core.sources.jsonl import JsonlSourceConfig, JsonlTaskSource

    path = write_lines(tmp_path / "tasks.jsonl", task_line("a"), task_line("b"), task_line("a"))
    source = JsonlTaskSource(JsonlSourceConfig(path=str(path)))
    with pytest.raises(DataError) as info:
        list(source.load(BadRecords()))
    assert f"{path}:3" in str(info.value) and "duplicate task_id 'a' (first at line 1)" in str(info.value)
    bad = BadRecords("skip")
    assert [task.task_id for task in source.load(bad)] == ["a", "b"] and bad.count == 1


def test_a_torn_last_line_is_cut_so_the_next_append_starts_clean(tmp_path) -> None:
    from beyondagent_core.jsonl import append_jsonl, cut_torn_tail

    path = tmp_path / "log.jsonl"
    append_jsonl(path, [{"a": 1}, {"a": 2}])
    assert cut_torn_tail(path) == 0
    with path.open("ab") as handle:
        handle.write(b'{"a": 3, "b": "torn')
    assert cut_torn_tail(path) == len(b'{"a": 3, "b": "torn')
    append_jsonl(path, [{"a": 4}])
    assert path.read_text().splitlines() == ['{"a": 1}', '{"a": 2}', '{"a": 4}']
    only_torn = tmp_path / "torn.jsonl"
    only_torn.write_bytes(b'{"x": ')
    assert cut_torn_tail(only_torn) == 6 and only_torn.read_bytes() == b""


def test_json_too_deep_or_too_long_to_read_is_a_bad_record_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text('{"task_id": "a"}\n' + "[" * 100_000 + "]" * 100_000 + "\n"
                    + '{"task_id": "b", "n": ' + "9" * 5000 + "}\n")
    bad = BadRecords("skip")
    assert [obj for _, _, obj in json_lines(path, bad)] == [{"task_id": "a"}]
    assert bad.count == 2
    assert bad.examples[0].startswith(f"{path}:2: ") and "nested too deeply" in bad.examples[0]
    assert bad.examples[1].startswith(f"{path}:3: ") and "4300 digits" in bad.examples[1]
