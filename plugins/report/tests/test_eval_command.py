"""`beyondagent eval` end to end: the real CLI, gymnasium FrozenLake, the react workflow and the env judge.

The model is an OpenAI-compatible endpoint on loopback (`openai_server`, a stand-in for a hosted
LLM) that always answers one move, so each task's outcome is known; the checkpoint path is tested
with the tiny model in plugins/torch/tests/test_eval_checkpoint.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
QUICKSTART = ROOT / "examples" / "quickstart.yaml"
PLUGINS = "gym,mixers,torch"

pytest.importorskip("beyondagent_plugin_gym")


def beyondagent(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BEYONDAGENT_PLUGINS": PLUGINS}
    env.pop("BEYONDAGENT_DISABLE_PLUGIN_AUTOLOAD", None)
    return subprocess.run([sys.executable, "-m", "beyondagent_core.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def take_one(body: dict[str, Any]) -> str:
    """A Nim player (the endpoints' scripted replies): one object from the first pile that has some."""
    import re

    board = body["messages"][-1]["content"].rsplit("Current Pile:", 1)[-1]
    sizes = [int(n) for n in re.findall(r"pile \d+: (\d+)", board)] or [1]
    return f"[{next(i for i, n in enumerate(sizes) if n)} 1]"


def textarena_env() -> dict[str, str]:
    env = {**os.environ, "BEYONDAGENT_PLUGINS": "textarena,mixers,torch,advantages"}
    env.pop("BEYONDAGENT_DISABLE_PLUGIN_AUTOLOAD", None)
    return env


def eval_args(server: Any, out: Path, *extra: str) -> list[str]:
    return ["eval", str(QUICKSTART), f"run.output_dir={out / 'runs'}", "tasks.val.count=6", "--model", "policy",
            "--base-url", server.base_url, "--k", "3", "--out", str(out / "eval"), *extra]


def test_an_endpoint_is_evaluated_and_the_eval_resumes(openai_server: Any, tmp_path: Path) -> None:
    openai_server.responder = lambda body: "right"
    proc = beyondagent(*eval_args(openai_server, tmp_path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    result = json.loads((tmp_path / "eval" / "eval.json").read_text())
    summary = result["summary"]
    assert summary["tasks"] == 6 and summary["episodes"] == 18 and summary["errors"] == 0
    # One move, always the same: every sample of a task ends the same way.
    for row in result["tasks"]:
        assert row["successes"] in (0, 3) and row["best_score"] == row["mean_score"]
    assert summary["pass@1"] == summary["pass@3"]
    assert 0 < summary["mean_turns"] <= 6
    page = (tmp_path / "eval" / "eval.html").read_text()
    assert "pass@3" in page and result["tasks"][0]["task_id"] in page
    lines = (tmp_path / "eval" / "episodes.jsonl").read_text().splitlines()
    assert len(lines) == 18 and json.loads(lines[0])["trajectory"]["turns"]

    requests = len(openai_server.requests)
    again = beyondagent(*eval_args(openai_server, tmp_path), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert len(openai_server.requests) == requests  # every episode was done: nothing is asked
    assert json.loads((tmp_path / "eval" / "eval.json").read_text())["summary"] == summary


def test_an_interrupted_eval_runs_only_what_is_missing(openai_server: Any, tmp_path: Path) -> None:
    openai_server.responder = lambda body: "down"
    assert beyondagent(*eval_args(openai_server, tmp_path), cwd=tmp_path).returncode == 0
    episodes = tmp_path / "eval" / "episodes.jsonl"
    kept = episodes.read_text().splitlines()[:10]
    episodes.write_text("\n".join(kept) + '\n{"sample": {"task_id": "tor')  # as if killed mid-line
    before = len(openai_server.requests)
    proc = beyondagent(*eval_args(openai_server, tmp_path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "eval" / "eval.json").read_text())["summary"]["episodes"] == 18
    assert len(openai_server.requests) - before > 8  # the check, then the 8 missing episodes' turns


def test_dry_run_says_what_would_run(openai_server: Any, tmp_path: Path) -> None:
    proc = beyondagent(*eval_args(openai_server, tmp_path, "--dry-run"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "6 tasks of tasks.val x k=3" in proc.stdout and not openai_server.requests


@pytest.mark.parametrize(("args", "words"), [
    (["--checkpoint", "nowhere"], "does not exist"),
    (["--checkpoint", "."], "is not a model"),
    (["--model", "m", "--base-url", "ftp://x"], "must be an http(s)://"),
    (["--model", "m", "--k", "0"], "argument --k: must be an integer in [1, 1024], got 0"),
])
def test_bad_arguments_are_usage_errors(tmp_path: Path, args: list[str], words: str) -> None:
    proc = beyondagent("eval", str(QUICKSTART), f"run.output_dir={tmp_path}", *args, cwd=tmp_path)
    assert proc.returncode == 2 and words in proc.stderr and "Traceback" not in proc.stderr


def test_an_endpoint_that_refuses_is_one_clear_error(openai_server: Any, tmp_path: Path) -> None:
    from beyondagent_core.testing.openai_server import Reply

    openai_server.responder = lambda body: Reply.fault(401)
    proc = beyondagent(*eval_args(openai_server, tmp_path), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "refused a test request" in proc.stderr and "Traceback" not in proc.stderr
    assert len(openai_server.requests) <= 4  # the check (and its retries), no episodes


def test_episodes_are_made_only_as_workers_free_up() -> None:
    """tasks x k episodes (up to 1024 per task) are never a list, nor coroutines all at once."""
    import asyncio

    from beyondagent_plugin_report.eval.evaluation import run_pool

    taken, running, most, taken_at_first_finish = 0, 0, 0, None

    def jobs() -> Any:
        nonlocal taken
        for number in range(5000):
            taken += 1
            yield number

    async def run(job: int) -> None:
        nonlocal running, most, taken_at_first_finish
        running += 1
        most = max(most, running)
        await asyncio.sleep(0)
        running -= 1
        if taken_at_first_finish is None:
            taken_at_first_finish = taken

    asyncio.run(run_pool(jobs(), run, 4))
    assert taken == 5000 and most == 4 and taken_at_first_finish == 4


def test_an_endpoints_credentials_are_written_in_no_file_of_the_eval(openai_server: Any, tmp_path: Path) -> None:
    openai_server.responder = lambda body: "right"
    base_url = openai_server.base_url.replace("http://", "http://gina:pw-778899@")
    proc = beyondagent("eval", str(QUICKSTART), f"run.output_dir={tmp_path / 'runs'}", "tasks.val.count=2",
                       "--model", "policy", "--base-url", base_url, "--k", "1", "--out", str(tmp_path / "eval"),
                       cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "eval" / "eval.json").read_text())["model"].startswith("endpoint policy at http://***@")
    for path in [*(tmp_path / "eval").rglob("*"), *(tmp_path / "runs").rglob("*")]:
        if path.is_file():
            assert "pw-778899" not in path.read_text(errors="replace"), path
    assert "pw-778899" not in proc.stdout + proc.stderr


@pytest.mark.skipif(not __import__("importlib").util.find_spec("beyondagent_plugin_textarena"),
                    reason="needs beyondagent-plugin-textarena")
def test_against_an_opponent_the_eval_reports_win_draw_and_loss(openai_server: Any, tmp_path: Path) -> None:
    """Nim against the env's random opponent, the endpoint always taking one object from the first pile
    that has some: each game ends in a win or a loss, and the eval says how many of each."""
    openai_server.responder = take_one
    spec = ROOT / "examples" / "textarena_hanoi.yaml"
    env = {**os.environ, "BEYONDAGENT_PLUGINS": "textarena,mixers,torch"}
    env.pop("BEYONDAGENT_DISABLE_PLUGIN_AUTOLOAD", None)
    proc = subprocess.run([sys.executable, "-m", "beyondagent_core.cli", "eval", str(spec),
                           f"run.output_dir={tmp_path / 'runs'}", "tasks.val.game=nim", "tasks.val.count=6",
                           "workflow.max_turns=20", "--model", "policy", "--base-url", openai_server.base_url,
                           "--k", "2", "--out", str(tmp_path / "eval")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((tmp_path / "eval" / "eval.json").read_text())["summary"]
    assert summary["win_rate"] + summary["draw_rate"] + summary["loss_rate"] == pytest.approx(1.0)
    assert summary["win_rate"] == summary["pass@1"] and summary["draw_rate"] == 0.0  # Nim has no draw


@pytest.mark.skipif(not __import__("importlib").util.find_spec("beyondagent_plugin_textarena"),
                    reason="needs beyondagent-plugin-textarena")
def test_a_self_play_eval_reports_each_seat(openai_server: Any, tmp_path: Path) -> None:
    """Nim in self-play (`env.opponent: self`): the endpoint plays both seats of each game, a line of
    episodes.jsonl holds the game's two seats, and the eval reports each seat's win rate (the two add up
    to 1: one game, one winner) besides the headline over both."""
    openai_server.responder = take_one
    env = textarena_env()
    command = [sys.executable, "-m", "beyondagent_core.cli", "eval", str(ROOT / "examples" / "selfplay_tictactoe.yaml"),
               f"run.output_dir={tmp_path / 'runs'}", "tasks.val.game=nim", "tasks.val.opponent=null",
               "tasks.val.count=3", "workflow.max_turns=20", "--model", "policy", "--base-url",
               openai_server.base_url, "--k", "2", "--out", str(tmp_path / "eval")]
    proc = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "by seat" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-3000:]
    result = json.loads((tmp_path / "eval" / "eval.json").read_text())
    seats = result["by_seat"]
    assert set(seats) == {"seat 0", "seat 1"} and result["summary"]["episodes"] == 3 * 2 * 2
    assert seats["seat 0"]["win_rate"] + seats["seat 1"]["win_rate"] == pytest.approx(1.0)
    lines = (tmp_path / "eval" / "episodes.jsonl").read_text().splitlines()
    assert len(lines) == 6 and all(len(json.loads(line)["other_seats"]) == 1 for line in lines)
    again = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and json.loads((tmp_path / "eval" / "eval.json").read_text())["by_seat"] == seats
    assert len((tmp_path / "eval" / "episodes.jsonl").read_text().splitlines()) == 6  # resumed: nothing re-run


@pytest.mark.skipif(not __import__("importlib").util.find_spec("beyondagent_plugin_textarena"),
                    reason="needs beyondagent-plugin-textarena")
def test_head_to_head_the_model_plays_one_seat_and_the_opponent_the_other(openai_server: Any, tmp_path: Path) -> None:
    """Nim in self-play with an opponent (`--opponent-model`, a second endpoint): in sample i of a task the
    model plays seat i mod 2 and the opponent the other; the numbers are the model's (one seat a game),
    elo_vs_opponent follows its score, and each endpoint was asked only for its own seat's moves."""
    from beyondagent_core.testing.openai_server import ScriptedOpenAIServer

    openai_server.responder = take_one
    env = textarena_env()
    with ScriptedOpenAIServer(take_one) as rival:
        command = [sys.executable, "-m", "beyondagent_core.cli", "eval",
                   str(ROOT / "examples" / "selfplay_tictactoe.yaml"), f"run.output_dir={tmp_path / 'runs'}",
                   "tasks.val.game=nim", "tasks.val.opponent=null", "tasks.val.count=3", "workflow.max_turns=20",
                   "--model", "policy", "--base-url", openai_server.base_url, "--opponent-model", "earlier",
                   "--opponent-base-url", rival.base_url, "--k", "2", "--out", str(tmp_path / "eval")]
        proc = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        asked = {name: sum("Reply with OK" not in json.dumps(r) for r in server.requests)  # less the check
                 for name, server in (("model", openai_server), ("rival", rival))}
    result = json.loads((tmp_path / "eval" / "eval.json").read_text())
    assert result["opponent"].startswith("endpoint earlier at http://127.0.0.1")
    summary = result["summary"]
    assert summary["episodes"] == 3 * 2  # the model's seat of each game only
    assert summary["win_rate"] + summary["loss_rate"] == pytest.approx(1.0)
    score = summary["win_rate"]
    edge = 0.5 / 6
    expected = 400 * __import__("math").log10(min(max(score, edge), 1 - edge) / (1 - min(max(score, edge), 1 - edge)))
    assert summary["elo_vs_opponent"] == pytest.approx(expected)
    lines = [json.loads(line) for line in (tmp_path / "eval" / "episodes.jsonl").read_text().splitlines()]
    assert len(lines) == 6
    for line in lines:  # sample i: the model on seat i mod 2, the opponent's seat kept apart
        index = line["sample"]["index"]
        assert line["sample"]["seat"] == index % 2 and "other_seats" not in line
        assert [seat["seat"] for seat in line["opponent_seats"]] == [1 - index % 2]
    # each endpoint was asked for exactly its own seats' moves
    turns = {"model": sum(moves(line["trajectory"]) for line in lines),
             "rival": sum(moves(seat) for line in lines for seat in line["opponent_seats"])}
    assert asked == turns and turns["rival"] > 0


def moves(trajectory: dict[str, Any]) -> int:
    return sum(1 for turn in trajectory["turns"] if turn["role"] == "assistant")
