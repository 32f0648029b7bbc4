"""BFCL verdicts the served tests leave open (the eighth mutation audit): partial credit (`reward: turns`)
counts every turn BFCL's checker passes, the last one too; an episode cut in its last turn is judged on
what it did (as the env's docstring says), one cut in an earlier turn fails as force-terminated; and
`live_irrelevance` is judged by BFCL's irrelevance rule (no call passes), `live_relevance` by its
relevance rule (a call passes).

The env runs in the plugin's venv (it imports `bfcl_eval`): one child process there builds real
`BFCLEnv`s on BFCL's real entries and plays scripted steps (they stand in for a model), as
test_bfcl_keys_reach.py does. multi_turn_base_0's ground truth, turn by turn, is in
test_bfcl_served_env.py (BASE_0); here its calls, each turn ended by a message with no call.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

EPISODES = r'''
import json, sys
from beyondagent_core import Task
from beyondagent_plugin_bfcl.config import BFCLConfig
from beyondagent_plugin_bfcl.env import BFCLEnv


def call(name, **arguments):
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


TURNS = [
    call("cd", folder="document") + call("mkdir", dir_name="temp") + call("mv", source="final_report.pdf",
                                                                          destination="temp"),
    call("cd", folder="temp") + call("grep", file_name="final_report.pdf", pattern="budget analysis"),
    call("sort", file_name="final_report.pdf"),
    call("cd", folder="..") + call("mv", source="previous_report.pdf", destination="temp")
    + call("cd", folder="temp") + call("diff", file_name1="final_report.pdf", file_name2="previous_report.pdf"),
]


def play(task_id, messages, **settings):
    env = BFCLEnv(BFCLConfig(**settings))
    try:
        reset = env.reset(Task(task_id=task_id, env="bfcl"))
        terminated = False
        for message in messages:
            terminated = env.step({"role": "assistant", "content": message}).terminated
        reward = env.evaluate()
        return {"terminated": terminated, "score": reward.score, "success": reward.success,
                "error_type": reward.details["error_type"], "partial": reward.details.get("partial"),
                "turns_reached": reward.details["turns_reached"], "tools": reset.info["tools"]}
    finally:
        env.close()


def turns(count):  # the first `count` turns done, each ended by a message with no call
    return [message for turn in TURNS[:count] for message in (turn, "Done.")]


first = play("live_irrelevance_0-0-0", ["x"])["tools"][0]
guess = call(first["name"], **{key: "x" for key in first["parameters"].get("required", [])})
relevant = play("live_relevance_0-0-0", ["x"])["tools"][0]
relevant_call = call(relevant["name"], **{key: "x" for key in relevant["parameters"].get("required", [])})
json.dump({
    "cut_in_turn_3": {reward: play("multi_turn_base_0", turns(2) + [TURNS[2]], reward=reward)
                      for reward in ("official", "turns")},
    "cut_in_last_turn": {reward: play("multi_turn_base_0", turns(3) + [TURNS[3]], reward=reward)
                         for reward in ("official", "turns")},
    "all_turns": play("multi_turn_base_0", turns(4), reward="turns"),
    "live_irrelevance": {"no_call": play("live_irrelevance_0-0-0", ["None of these functions fits."]),
                         "call": play("live_irrelevance_0-0-0", [guess])},
    "live_relevance": {"no_call": play("live_relevance_0-0-0", ["I will not call anything."]),
                       "call": play("live_relevance_0-0-0", [relevant_call])},
}, sys.stdout)
'''


@pytest.fixture(scope="module")
def played(bfcl_venv: Any) -> dict[str, Any]:
    done = subprocess.run([str(bfcl_venv.python), "-c", EPISODES], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_partial_credit_counts_every_turn_passed_before_the_cut(played: dict[str, Any]) -> None:
    official, turns = played["cut_in_turn_3"]["official"], played["cut_in_turn_3"]["turns"]
    assert not official["terminated"] and official["turns_reached"] == 3
    assert (official["score"], official["success"]) == (0.0, False)
    assert official["error_type"] == "multi_turn:force_terminated"
    # two of four turns passed, then the cut: 2 / 4
    assert (turns["score"], turns["partial"], turns["success"]) == (0.5, 0.5, False)
    assert turns["error_type"] == "multi_turn:force_terminated"


def test_an_episode_cut_in_its_last_turn_is_judged_on_what_it_did(played: dict[str, Any]) -> None:
    for reward in ("official", "turns"):
        cut = played["cut_in_last_turn"][reward]
        assert not cut["terminated"] and cut["turns_reached"] == 4
        assert (cut["score"], cut["success"], cut["error_type"]) == (1.0, True, None), cut
    done = played["all_turns"]
    assert done["terminated"] and (done["score"], done["success"], done["partial"]) == (1.0, True, None)


def test_live_irrelevance_passes_without_a_call_and_live_relevance_with_one(played: dict[str, Any]) -> None:
    irrelevance, relevance = played["live_irrelevance"], played["live_relevance"]
    assert (irrelevance["no_call"]["success"], irrelevance["no_call"]["score"]) == (True, 1.0)
    assert (irrelevance["call"]["success"], irrelevance["call"]["score"]) == (False, 0.0)
    assert irrelevance["call"]["error_type"] == "irrelevance_error:decoder_success"
    assert (relevance["call"]["success"], relevance["call"]["score"]) == (True, 1.0)
    assert (relevance["no_call"]["success"], relevance["no_call"]["score"]) == (False, 0.0)
    assert relevance["no_call"]["error_type"] == "relevance_error:decoder_failed"
