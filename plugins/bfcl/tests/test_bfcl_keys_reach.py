"""Spec keys of the BFCL plugin that reach their code: the env's `max_calls_per_step`,
`max_steps_per_turn` and `data_dir`, and the task source's `data_dir`.

The env runs in the plugin's venv (it imports `bfcl_eval`): one child process there builds real
`BFCLEnv`s on BFCL's real entry `multi_turn_base_0` (its backends in their sandbox process, BFCL's
checker), each with the default config and with one key set, and plays the same scripted steps
(the scripted calls stand in for a model). Checked, against the default each time:

- `max_calls_per_step: 2`: of a message's 5 calls, 2 run, the other 3 are reported not run;
- `max_steps_per_turn: 2`: the 3rd step with calls in one turn force-quits the entry, as BFCL does;
- `data_dir`: the entry, its answer and the env's task list are read from that directory (a
  one-turn copy of the entry whose answer is one `cd`), so the same two steps end the episode and
  pass BFCL's checker, where BFCL's own data has four turns.

The task source's `data_dir` (main environment, BFCL's data files read directly) loads the tasks
of that directory instead of the 200 of bfcl_eval's `multi_turn_base`.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from beyondagent_plugin_bfcl.config import BFCLTasksConfig

from beyondagent_core.jsonl import BadRecords

TASK = "multi_turn_base_0"
MARKER = "From the data_dir: go into the document directory."

EPISODES = r'''
import json, sys
from beyondagent_core import Task
from beyondagent_plugin_bfcl.config import BFCLConfig
from beyondagent_plugin_bfcl.env import BFCLEnv

TASK, data_dir = sys.argv[1], sys.argv[2]


def call(name, **arguments):
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def play(settings, messages):
    env = BFCLEnv(BFCLConfig(**settings))
    try:
        ids = env.task_ids("all")
        reset = env.reset(Task(task_id=TASK, env="bfcl"))
        steps = []
        for message in messages:
            step = env.step({"role": "assistant", "content": message})
            steps.append({"content": step.observation[0]["content"], "terminated": step.terminated,
                          "info": step.info})
            if step.terminated:
                break
        reward = env.evaluate()
        return {"ids": len(ids), "first": reset.messages[0]["content"], "turns": reset.info["turns"], "steps": steps,
                "score": reward.score, "success": reward.success, "error_type": reward.details["error_type"]}
    finally:
        env.close()


five = "\n".join(call("ls") for _ in range(5))
cd_then_done = [call("cd", folder="document"), "Done."]
json.dump({
    "calls": {"default": play({}, [five]), "set": play({"max_calls_per_step": 2}, [five])},
    "steps": {"default": play({}, [call("ls")] * 3), "set": play({"max_steps_per_turn": 2}, [call("ls")] * 3)},
    "data_dir": {"default": play({}, cd_then_done), "set": play({"data_dir": data_dir}, cd_then_done)},
}, sys.stdout)
'''


def one_turn_data_dir(root: Path, source: Path) -> Path:
    """A BFCL data directory holding `TASK` cut to one turn (question `MARKER`), its answer one `cd`."""
    entry = next(json.loads(line) for line in (source / "BFCL_v4_multi_turn_base.json").open() if TASK in line)
    entry = {**entry, "question": [[{"role": "user", "content": MARKER}]]}
    (root / "possible_answer").mkdir(parents=True)
    (root / "multi_turn_func_doc").mkdir()
    (root / "BFCL_v4_multi_turn_base.json").write_text(json.dumps(entry) + "\n")
    (root / "possible_answer" / "BFCL_v4_multi_turn_base.json").write_text(
        json.dumps({"id": TASK, "ground_truth": [["cd(folder='document')"]]}) + "\n")
    for doc in (source / "multi_turn_func_doc").glob("*.json"):
        (root / "multi_turn_func_doc" / doc.name).write_bytes(doc.read_bytes())
    return root


@pytest.fixture(scope="module")
def bfcl_data(bfcl_venv: Any) -> Path:
    from beyondagent_plugin_bfcl.data import venv_data_dir

    return venv_data_dir()


@pytest.fixture(scope="module")
def own_data(tmp_path_factory: pytest.TempPathFactory, bfcl_data: Path) -> Path:
    return one_turn_data_dir(tmp_path_factory.mktemp("bfcl") / "data", bfcl_data)


@pytest.fixture(scope="module")
def played(bfcl_venv: Any, own_data: Path) -> dict[str, Any]:
    done = subprocess.run([str(bfcl_venv.python), "-c", EPISODES, TASK, str(own_data)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_max_calls_per_step_runs_that_many_calls_of_a_message(played: dict[str, Any]) -> None:
    default, limited = played["calls"]["default"]["steps"][0], played["calls"]["set"]["steps"][0]
    assert default["info"]["calls"] == 5 and default["info"]["not_run"] == 0
    assert "was not run" not in default["content"]
    assert limited["info"]["calls"] == 5 and limited["info"]["not_run"] == 3
    results = limited["content"].split("</tool_response>")
    assert all("current_directory_content" in result for result in results[:2])
    assert all("ls() was not run: at most 2 calls of one message run here" in result for result in results[2:5])


def test_max_steps_per_turn_force_quits_a_turn_past_it(played: dict[str, Any]) -> None:
    default, limited = played["steps"]["default"], played["steps"]["set"]
    assert [step["terminated"] for step in default["steps"]] == [False, False, False]  # BFCL's 20 is far off
    assert [step["terminated"] for step in limited["steps"]] == [False, False, True]
    assert limited["steps"][-1]["info"]["ended_by"] == "step_limit"
    assert limited["error_type"] == "multi_turn:force_terminated" and not limited["success"]


def test_the_envs_data_dir_is_where_entries_and_answers_are_read(played: dict[str, Any]) -> None:
    default, own = played["data_dir"]["default"], played["data_dir"]["set"]
    assert default["turns"] == 4 and default["first"].startswith("Move 'final_report.pdf'")
    assert not default["steps"][-1]["terminated"] and not default["success"]  # three turns left to do
    assert default["ids"] > 4000 and own["ids"] == 1  # the env's own task list: data_dir's one entry
    assert own["turns"] == 1 and own["first"] == MARKER
    assert own["steps"][-1]["terminated"]  # the one turn ended
    assert own["success"] and own["score"] == 1.0, own  # BFCL's checker, on the answer in data_dir


def test_the_task_sources_data_dir_is_where_tasks_are_read(bfcl_data: Path, own_data: Path) -> None:
    from beyondagent_plugin_bfcl.tasks import BFCLTasks

    def load(**settings: Any) -> list[Any]:
        config = BFCLTasksConfig(categories=["multi_turn_base"], split="all", **settings)
        return list(BFCLTasks(config).load(BadRecords(policy="fail")))

    default = load()
    assert len(default) == 200 and next(t for t in default if t.task_id == TASK).metadata["turns"] == 4
    own = load(data_dir=str(own_data))
    assert [(t.task_id, t.metadata["turns"]) for t in own] == [(TASK, 1)]
    assert "cd" in own[0].metadata["functions"]  # the function docs of data_dir's multi_turn_func_doc
