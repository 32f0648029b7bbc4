"""Exploration's BFCL goals hold only the calls that ran (main venv: `explore.py` needs no bfcl_eval).

A call to a function no backend has (`rm_everything()`) or one refused over a cap (recorded as
`not_run_power()`) was kept in the goal of the next state-changing call: the env then refused the
synthetic task ("its goal calls rm_everything, which no backend ... has") and its question asked for
that call. Found by the eighth mutation audit; the records are what `BFCLEnv.step` appends.
"""

from __future__ import annotations

from beyondagent_plugin_bfcl.explore import MAX_GOAL_CALLS, achieved_goals, check_goal


def record(call: str, *, ok: bool = True, changed: bool = False) -> dict:
    return {"call": call, "ok": ok, "changed": changed}


def test_failed_and_refused_calls_are_left_out_of_a_goal() -> None:
    executed = [record("rm_everything()", ok=False), record("cd(folder='document')"),
                record("not_run_power()", ok=False), record("mkdir(dir_name='explored')", changed=True)]
    [goal] = achieved_goals(executed, "multi_turn_base_0")
    assert goal["goal"]["calls"] == ["cd(folder='document')", "mkdir(dir_name='explored')"]
    assert "rm_everything" not in goal["query"] and "power" not in goal["query"]
    check_goal(goal["goal"])


def test_the_call_limit_counts_the_calls_a_goal_keeps() -> None:
    failed = [record(f"missing_{i}()", ok=False) for i in range(5)]
    ran = [record(f"cd(folder='d{i}')") for i in range(MAX_GOAL_CALLS - 1)]
    goals = achieved_goals([*failed, *ran, record("mkdir(dir_name='x')", changed=True),
                            record("mkdir(dir_name='y')", changed=True)], "multi_turn_base_0")
    assert [len(goal["goal"]["calls"]) for goal in goals] == [MAX_GOAL_CALLS]  # the second would be 13
