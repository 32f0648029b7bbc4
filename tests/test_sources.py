"""The built-in task sources `jsonl` and `parquet` (verl's row schema), built through the registry."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from structlog.testing import capture_logs  # noqa: E402

from beyondagent_core.errors import DataError, SpecError, UnknownComponentError  # noqa: E402
from beyondagent_core.jsonl import BadRecords, write_tasks  # noqa: E402
from beyondagent_core.registry import Registry  # noqa: E402
from beyondagent_core.sources.parquet import read_parquet, write_parquet  # noqa: E402
from beyondagent_core.spec import select_component  # noqa: E402
from beyondagent_core.testing.contracts import TaskSourceContract  # noqa: E402
from beyondagent_core.types import Task  # noqa: E402

VERL_COLUMNS = ["data_source", "prompt", "ability", "reward_model", "extra_info"]
INSTRUCTION = 'Let\'s think step by step and output the final answer after "####".'
GSM8K = [
    ("Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
     "How many clips did Natalia sell altogether in April and May?",
     "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips altogether "
     "in April and May.\n#### 72", "72"),
    ("Weng earns $12 an hour for babysitting. Yesterday, she just did 50 minutes of babysitting. "
     "How much did she earn?",
     "Weng earns 12/60 = $<<12/60=0.2>>0.2 per minute.\nWorking 50 minutes, she earned 0.2 x 50 = "
     "$<<0.2*50=10>>10.\n#### 10", "10"),
    ("Betty is saving money for a new wallet which costs $100. How much more money does Betty need?",
     "In the beginning, Betty has only 100 / 2 = $<<100/2=50>>50.\n#### 5", "5"),
]


def gsm8k_rows(split: str = "train") -> list[dict[str, Any]]:
    """Rows exactly as verl's examples/data_preprocess/gsm8k.py builds them."""
    rows = []
    for idx, (question_raw, answer_raw, solution) in enumerate(GSM8K):
        rows.append({
            "data_source": "openai/gsm8k",
            "prompt": [{"role": "user", "content": question_raw + " " + INSTRUCTION}],
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": solution},
            "extra_info": {"split": split, "index": idx, "answer": answer_raw, "question": question_raw},
        })
    return rows


def write_rows(path: Path, rows: list[dict[str, Any]], schema: Any = None) -> Path:
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return path


def build(plugin_manager: Any, block: dict[str, Any]) -> Any:
    return select_component(Registry(plugin_manager), "task_source", block, key_path="tasks.train").create()


def load(source: Any, policy: str = "fail") -> tuple[list[Task], BadRecords]:
    bad = BadRecords(policy)  # type: ignore[arg-type]
    return list(source.load(bad)), bad


SEEDS = [
    Task(task_id="t1", env="math", query="1 + 1?", ground_truth="2", judge="math"),
    Task(task_id="t2", query="Name three primes.", ground_truth=[2, 3, 5], metadata={"level": 3}),
    Task(task_id="t3", query=None, metadata={"seed": 7}),
]


# --- the contract suite, for both sources ------------------------------------------------------


class TestJsonlSourceContract(TaskSourceContract):
    @pytest.fixture
    def implementation(self, tmp_path: Path) -> dict[str, Any]:
        path = tmp_path / "tasks.jsonl"
        write_tasks(path, SEEDS)
        return {"name": "jsonl", "path": str(path)}


class TestParquetSourceContract(TaskSourceContract):
    @pytest.fixture
    def implementation(self, tmp_path: Path) -> dict[str, Any]:
        return {"name": "parquet", "path": str(write_rows(tmp_path / "train.parquet", gsm8k_rows()))}


# --- jsonl source ---------------------------------------------------------------------------------


def test_jsonl_source_reads_tasks_and_limit(plugin_manager, tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    write_tasks(path, SEEDS)
    assert load(build(plugin_manager, {"name": "jsonl", "path": str(path)}))[0] == SEEDS
    assert load(build(plugin_manager, {"name": "jsonl", "path": str(path), "limit": 2}))[0] == SEEDS[:2]
    assert load(build(plugin_manager, {"name": "jsonl", "path": str(path), "limit": 0}))[0] == []
    assert load(build(plugin_manager, {"name": "jsonl", "path": str(path), "limit": 99}))[0] == SEEDS


def test_jsonl_source_goes_through_the_bad_record_policy(plugin_manager, tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(SEEDS[0].to_dict()) + "\n{broken\n" + json.dumps(SEEDS[1].to_dict()) + "\n",
                    encoding="utf-8")
    source = build(plugin_manager, {"name": "jsonl", "path": str(path)})
    with pytest.raises(DataError) as info:
        load(source, "fail")
    assert f"{path}:2" in str(info.value)
    tasks, bad = load(source, "skip")
    assert tasks == SEEDS[:2]
    assert bad.count == 1


@pytest.mark.parametrize("name", ["jsonl", "parquet"])
def test_negative_limit_is_a_spec_error(plugin_manager, tmp_path: Path, name: str) -> None:
    with pytest.raises(SpecError) as info:
        build(plugin_manager, {"name": name, "path": str(tmp_path / "x"), "limit": -1})
    message = str(info.value)
    assert "tasks.train" in message
    assert "limit must be >= 0, got -1" in message
    assert "builtin" in message


@pytest.mark.parametrize("name", ["jsonl", "parquet"])
def test_missing_file_is_a_data_error(plugin_manager, tmp_path: Path, name: str) -> None:
    source = build(plugin_manager, {"name": name, "path": str(tmp_path / "missing.data")})
    with pytest.raises(DataError, match="file not found"):
        load(source)


# --- parquet: verl's files read as they are --------------------------------------------------------


def test_reads_verl_gsm8k_rows(plugin_manager, tmp_path: Path) -> None:
    path = write_rows(tmp_path / "train.parquet", gsm8k_rows())
    tasks, bad = load(build(plugin_manager, {"name": "parquet", "path": str(path)}))
    assert bad.count == 0
    assert [task.task_id for task in tasks] == ["openai/gsm8k-0", "openai/gsm8k-1", "openai/gsm8k-2"]
    assert [task.ground_truth for task in tasks] == ["72", "10", "5"]
    first = tasks[0]
    question, answer, _ = GSM8K[0]
    assert first.query == question + " " + INSTRUCTION
    assert first.origin == "original"
    assert first.env is None and first.judge is None
    assert first.metadata["data_source"] == "openai/gsm8k"
    assert first.metadata["ability"] == "math"
    assert first.metadata["reward_style"] == "rule"
    assert first.metadata["prompt"] == [{"role": "user", "content": question + " " + INSTRUCTION}]
    assert first.metadata["extra_info"] == {"split": "train", "index": 0, "answer": answer, "question": question}


def test_query_is_the_last_user_message(tmp_path: Path) -> None:
    row = gsm8k_rows()[0]
    row["prompt"] = [
        {"role": "system", "content": "You are a math tutor."},
        {"role": "user", "content": "What is 2 + 2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "And 3 + 3?"},
        {"role": "assistant", "content": "(thinking)"},
    ]
    path = write_rows(tmp_path / "chat.parquet", [row])
    [task] = list(read_parquet(path))
    assert task.query == "And 3 + 3?"
    assert task.metadata["prompt"] == row["prompt"]


def test_task_id_falls_back_to_the_row_number_without_an_index(tmp_path: Path) -> None:
    rows = gsm8k_rows()
    for row in rows:
        row["extra_info"] = {"split": "test"}
    path = write_rows(tmp_path / "noindex.parquet", rows)
    assert [task.task_id for task in read_parquet(path)] == ["openai/gsm8k-0", "openai/gsm8k-1", "openai/gsm8k-2"]


def test_env_and_judge_options_are_set_on_every_task(plugin_manager, tmp_path: Path) -> None:
    verl_file = write_rows(tmp_path / "verl.parquet", gsm8k_rows())
    ours = tmp_path / "ours.parquet"
    write_parquet(ours, SEEDS)
    for path in (verl_file, ours):
        block = {"name": "parquet", "path": str(path), "env": "calculator", "judge": "env"}
        tasks, _ = load(build(plugin_manager, block))
        assert tasks
        assert {task.env for task in tasks} == {"calculator"}
        assert {task.judge for task in tasks} == {"env"}
    with pytest.raises(UnknownComponentError, match="did you mean 'env'"):  # a judge that does not exist
        build(plugin_manager, {"name": "parquet", "path": str(ours), "judge": "evn"})


def test_parquet_limit_option(plugin_manager, tmp_path: Path) -> None:
    path = write_rows(tmp_path / "train.parquet", gsm8k_rows())
    tasks, _ = load(build(plugin_manager, {"name": "parquet", "path": str(path), "limit": 2}))
    assert [task.task_id for task in tasks] == ["openai/gsm8k-0", "openai/gsm8k-1"]
    assert load(build(plugin_manager, {"name": "parquet", "path": str(path), "limit": 0}))[0] == []


# --- parquet: our own files round-trip exactly ------------------------------------------------------


ROUND_TRIP = [
    Task(task_id="o-1", env="math", query="2 + 3?", ground_truth="5", judge="math",
         metadata={"data_source": "openai/gsm8k", "ability": "math",
                   "prompt": [{"role": "user", "content": "2 + 3?"}], "difficulty": 0.3}),
    Task(task_id="o-2", query="List the primes below 10.", ground_truth=[2, 3, 5, 7]),
    Task(task_id="o-3", env="appworld", ground_truth=None, metadata={"apis": ["spotify", "venmo"]}),
    Task(task_id="s-1", env="appworld", query="Find the most played song.", origin="synthetic",
         seed_task_id="o-3", confidence=0.85, open_query=True,
         ground_truth={"action_sequence": ["login()", "top_song()"], "answer": "Song A"}),
    Task(task_id="s-2", query="Compute 2 + 3 + 4.", ground_truth=9, origin="synthetic", seed_task_id="o-1",
         confidence=1.0),
]


def test_write_parquet_then_read_back_is_exact(tmp_path: Path) -> None:
    path = tmp_path / "data" / "train.parquet"
    assert write_parquet(path, ROUND_TRIP) == len(ROUND_TRIP)
    assert list(read_parquet(path)) == ROUND_TRIP
    assert sorted(p.name for p in path.parent.iterdir()) == ["train.parquet"], "no temporary file is left"


def test_written_file_has_verl_columns(tmp_path: Path) -> None:
    path = tmp_path / "train.parquet"
    write_parquet(path, ROUND_TRIP, split="val")
    table = pq.read_table(path)
    assert table.column_names == VERL_COLUMNS
    rows = table.to_pylist()
    ground_truths = [row["reward_model"]["ground_truth"] for row in rows]
    assert all(gt is None or isinstance(gt, str) for gt in ground_truths)
    assert ground_truths[0] == "5"
    assert json.loads(ground_truths[1]) == [2, 3, 5, 7]
    assert ground_truths[2] is None
    assert json.loads(ground_truths[3]) == {"action_sequence": ["login()", "top_song()"], "answer": "Song A"}
    assert ground_truths[4] == "9"

    first = rows[0]
    assert first["data_source"] == "openai/gsm8k"
    assert first["ability"] == "math"
    assert first["prompt"] == [{"role": "user", "content": "2 + 3?"}]
    assert first["reward_model"]["style"] == "rule"
    assert [row["extra_info"]["index"] for row in rows] == list(range(len(ROUND_TRIP)))
    assert {row["extra_info"]["split"] for row in rows} == {"val"}
    assert [row["extra_info"]["task_id"] for row in rows] == [task.task_id for task in ROUND_TRIP]
    # A task without a prompt of its own becomes one user message, under its env's name.
    assert rows[3]["prompt"] == [{"role": "user", "content": "Find the most played song."}]
    assert rows[3]["data_source"] == "appworld"
    assert rows[1]["data_source"] == "beyondagent"


def test_verl_rows_survive_a_write_and_read(tmp_path: Path) -> None:
    verl_file = write_rows(tmp_path / "verl.parquet", gsm8k_rows())
    tasks = list(read_parquet(verl_file))
    ours = tmp_path / "ours.parquet"
    write_parquet(ours, tasks)
    assert list(read_parquet(ours)) == tasks
    rows = pq.read_table(ours).to_pylist()
    assert [row["prompt"] for row in rows] == [row["prompt"] for row in gsm8k_rows()]
    assert [row["reward_model"] for row in rows] == [row["reward_model"] for row in gsm8k_rows()]
    assert {row["data_source"] for row in rows} == {"openai/gsm8k"}
    assert {row["ability"] for row in rows} == {"math"}


def test_write_parquet_replaces_the_file(tmp_path: Path) -> None:
    path = tmp_path / "train.parquet"
    write_parquet(path, ROUND_TRIP)
    write_parquet(path, ROUND_TRIP[:2])
    assert list(read_parquet(path)) == ROUND_TRIP[:2]


# --- parquet: bad rows ------------------------------------------------------------------------------


MESSAGES = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
SCHEMA = pa.schema([
    ("data_source", pa.string()),
    ("prompt", MESSAGES),
    ("ability", pa.string()),
    ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
    ("extra_info", pa.struct([("split", pa.string()), ("index", pa.int64())])),
])


@pytest.fixture
def rows_with_bad_ones(tmp_path: Path) -> Path:
    """Rows 0 and 3 are good; row 1's message has no content; row 2 has no data_source."""
    rows = [
        {"data_source": "d", "prompt": [{"role": "user", "content": "q0"}], "ability": "a",
         "reward_model": {"style": "rule", "ground_truth": "0"}, "extra_info": {"split": "train", "index": 0}},
        {"data_source": "d", "prompt": [{"role": "user", "content": None}], "ability": "a",
         "reward_model": {"style": "rule", "ground_truth": "1"}, "extra_info": {"split": "train", "index": 1}},
        {"data_source": None, "prompt": [{"role": "user", "content": "q2"}], "ability": "a",
         "reward_model": {"style": "rule", "ground_truth": "2"}, "extra_info": {"split": "train", "index": 2}},
        {"data_source": "d", "prompt": [{"role": "user", "content": "q3"}], "ability": "a",
         "reward_model": {"style": "rule", "ground_truth": "3"}, "extra_info": {"split": "train", "index": 3}},
    ]
    return write_rows(tmp_path / "bad.parquet", rows, SCHEMA)


def test_bad_row_fails_with_its_row_number(plugin_manager, rows_with_bad_ones: Path) -> None:
    source = build(plugin_manager, {"name": "parquet", "path": str(rows_with_bad_ones)})
    with pytest.raises(DataError) as info:
        load(source, "fail")
    message = str(info.value)
    assert info.value.where == f"{rows_with_bad_ones} row 1"
    assert "prompt must be a list of chat messages" in message
    assert "--on-bad-record=skip" in message


def test_bad_rows_are_skipped_counted_and_logged(plugin_manager, rows_with_bad_ones: Path) -> None:
    source = build(plugin_manager, {"name": "parquet", "path": str(rows_with_bad_ones)})
    with capture_logs() as events:
        tasks, bad = load(source, "skip")
    assert [task.task_id for task in tasks] == ["d-0", "d-3"]
    assert bad.count == 2
    assert bad.examples[0].startswith(f"{rows_with_bad_ones} row 1: prompt must be a list of chat messages")
    assert bad.examples[1] == f"{rows_with_bad_ones} row 2: missing column 'data_source'"
    assert [e["where"] for e in events if e["event"] == "data.bad_record"] == [
        f"{rows_with_bad_ones} row 1", f"{rows_with_bad_ones} row 2"]


def test_prompt_that_is_a_plain_string_is_a_bad_row(tmp_path: Path) -> None:
    rows = [dict(row, prompt=row["prompt"][0]["content"]) for row in gsm8k_rows()]
    path = write_rows(tmp_path / "strings.parquet", rows)
    with pytest.raises(DataError, match="prompt must be a list of chat messages") as info:
        list(read_parquet(path, BadRecords("fail")))
    assert "row 0" in str(info.value)
    bad = BadRecords("skip")
    assert list(read_parquet(path, bad)) == []
    assert bad.count == 3
    assert [example.split(":")[0] for example in bad.examples] == [f"{path} row {n}" for n in range(3)]


def test_file_without_a_data_source_column(tmp_path: Path) -> None:
    rows = [{key: value for key, value in row.items() if key != "data_source"} for row in gsm8k_rows()]
    path = write_rows(tmp_path / "nosource.parquet", rows)
    with pytest.raises(DataError, match="missing column 'data_source'") as info:
        list(read_parquet(path))
    assert f"{path} row 0" in str(info.value)


def test_a_file_that_is_not_parquet_is_a_data_error(tmp_path: Path) -> None:
    path = tmp_path / "train.parquet"
    path.write_text("data_source,prompt\nx,y\n", encoding="utf-8")
    with pytest.raises(DataError, match="cannot read parquet file") as info:
        list(read_parquet(path))
    assert info.value.where == str(path)
