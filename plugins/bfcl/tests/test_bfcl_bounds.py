"""What a model's BFCL calls may cost: argument caps before a call runs, a process with a time and memory limit around it.

Issue 36 found that one call, `power(base=10, exponent=100000000000)`, froze the env service: BFCL
computed `10 ** 100000000000` in one C operation holding the GIL, so neither `/healthz` nor the
service's own 504 could answer, and every episode's env call hung. `logarithm(precision=3000000)`
and `square_root(precision=5000000)` hung > 15 s. Here, through the launched service with the
plugin's own serve args (env instances on threads), those calls come back at once as error
observations while `/healthz` answers in < 1 s, the episode goes on, and BFCL's check (which
replays the episode's calls) is fast too. Then the process boundary, for what the caps do not
foresee: in the BFCL venv, calls past the caps sent straight to the backends' process.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from typing import Any

from beyondagent_plugin_bfcl.config import BFCLConfig

from beyondagent_core import Task
from beyondagent_plugin_envservice.client import ClientOptions, EnvServiceClient
from beyondagent_core.testing.health import HealthPoller

MATH_TASK = "multi_turn_base_15"  # GorillaFileSystem + MathAPI
HOSTILE = [("power", {"base": 10, "exponent": 100000000000}),
           ("logarithm", {"value": 10, "base": 3, "precision": 3000000}),
           ("square_root", {"number": 2, "precision": 5000000}),
           ("round_number", {"number": 5, "decimal_places": -1000000000})]


def call(name: str, **arguments: Any) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def test_calls_past_the_caps_are_error_observations_and_healthz_stays_fast(server: Any) -> None:
    async def episode() -> dict[str, Any]:
        # No retries and a short timeout: before the fix this step never answered.
        client = EnvServiceClient(server.url, token=server.token, options=ClientOptions(timeout=15, retries=0))
        try:
            async with client.env("bfcl") as env:
                reset = await env.reset(Task(task_id=MATH_TASK, env="bfcl"))
                started = time.monotonic()
                hostile = await env.step({"role": "assistant", "content": "\n".join(
                    call(name, **arguments) for name, arguments in HOSTILE)})
                took = time.monotonic() - started
                after = await env.step({"role": "assistant", "content": call("power", base=2, exponent=10)})
                for _ in range(reset.info["turns"]):  # end every user turn: BFCL's check replays the calls
                    done = await env.step({"role": "assistant", "content": "Done."})
                started = time.monotonic()
                reward = await env.evaluate()
                return {"hostile": hostile, "took": took, "after": after, "done": done, "reward": reward,
                        "check_took": time.monotonic() - started}
        finally:
            await client.aclose()

    with HealthPoller(server.url) as poller:
        result = asyncio.run(episode())
        time.sleep(0.1)  # a few answers after the episode too
    assert len(poller.latencies) >= 3 and max(poller.latencies) < 1.0, poller.latencies
    assert result["took"] < 5.0
    observation = result["hostile"].observation[0]["content"]
    assert observation.count("<tool_response>") == len(HOSTILE)
    for name, _ in HOSTILE:
        assert f"Error during execution: {name}(" in observation
    assert "its result would have about 1e+11 digits; an integer result may have at most 4,300" in observation
    assert "precision=3000000 is outside what this environment allows, at most 1,000 digits" in observation
    assert "decimal_places=-1000000000 is outside what this environment allows, from -1,000 to 1,000" in observation
    assert result["hostile"].info["not_run"] == len(HOSTILE) == result["hostile"].info["errors"]
    assert '{"result": 1024}' in result["after"].observation[0]["content"]  # the episode goes on
    assert result["done"].terminated and result["check_took"] < 5.0
    assert not result["reward"].success  # the calls not run fail in BFCL's replay as they did here


def test_calls_past_the_per_step_count_are_not_run(server: Any) -> None:
    async def episode() -> Any:
        client = EnvServiceClient(server.url, token=server.token)
        try:
            async with client.env("bfcl") as env:
                await env.reset(Task(task_id=MATH_TASK, env="bfcl"))
                return await env.step({"role": "assistant", "content": "\n".join(
                    call("add", a=index, b=1) for index in range(70))})
        finally:
            await client.aclose()

    step = asyncio.run(episode())
    limit = BFCLConfig().max_calls_per_step
    results = step.observation[0]["content"].split("</tool_response>")
    assert '{"result": 64}' in results[limit - 1]
    assert f"was not run: at most {limit} calls of one message run here" in results[limit]
    assert step.info["calls"] == 70 and step.info["not_run"] == 70 - limit


# --- the process boundary, for what the caps do not foresee -------------------------------------

BOUNDARY = r'''
import json, sys, threading, time
from beyondagent_core import Task
from beyondagent_plugin_bfcl import bounds
from beyondagent_plugin_bfcl.config import BFCLConfig
from beyondagent_plugin_bfcl.env import BFCLEnv

bounds.BOUNDS.clear()  # the argument caps off: what they do not foresee, the backends' process must bound


def call(name, **arguments):
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def step(*calls):
    return env.step({"role": "assistant", "content": "".join(calls)})


env = BFCLEnv(BFCLConfig(max_call_seconds=1.0, max_call_memory_mb=1024))
env.reset(Task(task_id="multi_turn_base_15", env="bfcl"))
step(call("mkdir", dir_name="kept"))
ticks, finished = [], threading.Event()


def tick():  # this process's own work: it must go on while the call runs in the backends' process
    while not finished.is_set():
        ticks.append(time.monotonic())
        time.sleep(0.01)


thread = threading.Thread(target=tick)
thread.start()
started = time.monotonic()
stopped = step(call("add", a=1, b=1), call("power", base=10, exponent=100000000000), call("mkdir", dir_name="late"))
took = time.monotonic() - started
finished.set()
thread.join()
gaps = [later - earlier for earlier, later in zip(ticks, ticks[1:])]
memory = step(call("square_root", number=2, precision=10000000000), call("ls"))  # ~4 GB at once
after = step(call("add", a=1, b=2))
restores = env.backends.restores
env.close()
json.dump({"stopped": stopped.observation[0]["content"], "stopped_info": stopped.info, "took": took,
           "max_gap": max(gaps), "ticks": len(ticks), "memory": memory.observation[0]["content"],
           "restores": restores, "after": after.observation[0]["content"]}, sys.stdout)
'''


def test_the_backends_process_stops_a_call_that_never_yields_and_caps_its_memory(bfcl_venv: Any) -> None:
    done = subprocess.run([str(bfcl_venv.python), "-c", BOUNDARY], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    first, power, late = result["stopped"].split("</tool_response>")[:3]
    assert '{"result": 2}' in first  # the call before it ran
    assert "power(base=10,exponent=100000000000) was stopped: the calls of one step may take 1 s here" in power
    assert "mkdir(dir_name='late') was not run: the calls of this step already took the 1 s" in late
    assert result["stopped_info"]["not_run"] == 2
    assert 1.0 <= result["took"] < 4.0, result  # the deadline, then a restart and a replay
    # this process never waited on the call (a call holding its GIL would leave one gap as long as the call)
    assert result["max_gap"] < 0.5 and result["ticks"] >= 20, result
    assert result["restores"] == 1
    assert "MemoryError" in result["memory"] and "1024 MiB" in result["memory"], result["memory"]
    assert "kept" in result["memory"] and "late" not in result["memory"]  # restored by replay, as before the call
    assert '{"result": 3}' in result["after"]
