"""`beyondagent view` against a real server on loopback: list, filters, sorting, search, paging, one
episode, a group, curves, spec; a run that is still writing; torn and corrupt lines; the token; bad RUN_DIRs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from beyondagent_plugin_view.app import create_app, open_runs
from beyondagent_plugin_view.command import ServerThread
from view_run_factory import GROUP_SIZE, make_run, record, write_step

from beyondagent_core.episode_records import EPISODES_FILE
from beyondagent_core.jsonl import append_jsonl


TOKEN = "s3cret-s3cret-s3cret"


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return make_run(tmp_path / "viewtest")


@pytest.fixture
def client(run_dir: Path):
    runs = open_runs([run_dir], min_interval_s=0)
    with ServerThread(create_app(runs)) as url, httpx.Client(base_url=url, timeout=20) as http:
        yield http


def listing(client: httpx.Client, **params: object) -> dict:
    response = client.get("/r/0/api/episodes", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def test_list_filter_sort_search_and_page(client: httpx.Client) -> None:
    everything = listing(client)
    assert everything["total"] == 3 * 2 * GROUP_SIZE
    assert everything["summary"]["first_step"] == 1 and everything["summary"]["last_step"] == 3
    assert [row["line"] for row in everything["episodes"]] == list(range(1, 25))

    assert {row["step"] for row in listing(client, step_min=2, step_max=2)["episodes"]} == {2}
    wins = listing(client, success=1)
    assert wins["total"] == 6 and all(row["success"] for row in wins["episodes"])
    assert listing(client, success=0)["total"] == 18
    assert listing(client, task="lake-2-1")["total"] == GROUP_SIZE
    assert listing(client, group="1", step_min=3)["total"] == GROUP_SIZE

    by_score = listing(client, sort="score", desc=1)["episodes"]
    assert by_score[0]["score"] == 1.0 and by_score[-1]["score"] == -0.5
    ascending = listing(client, sort="score")["episodes"]
    assert ascending[0]["score"] == -0.5

    found = listing(client, q="down")  # the answer "Action: down" is in the turns of index 1 and 5 of each step
    assert found["total"] == 6 and all(row["idx"] % 4 == 1 for row in found["episodes"])
    assert listing(client, q='"; DROP TABLE episodes; --')["total"] == 0  # operators are quoted, not run

    page = listing(client, per_page=5, page=2, sort="line")
    assert page["pages"] == 5 and [row["line"] for row in page["episodes"]] == [6, 7, 8, 9, 10]
    assert listing(client, per_page=5, page=99)["episodes"] == []


def test_list_page_html_has_filters_sorting_and_pager(client: httpx.Client) -> None:
    html = client.get("/r/0/", params={"success": "1", "per_page": 2}).text
    assert 'name="q"' in html and 'name="success"' in html
    assert "page 1 of 3" in html and "6 episodes match" in html
    assert "sort=score" in html  # sortable column headers
    assert html.count('<tr data-id=') == 2
    assert client.get("/", follow_redirects=True).status_code == 200  # one run: redirected to it


def test_episode_tokens_mask_logprobs_and_advantages(client: httpx.Client) -> None:
    data = client.get("/r/0/api/episodes/1").json()
    tokens = data["tokens"]
    assert [t["mask"] for t in tokens] == [0] * 6 + [1, 1, 1, 0, 0, 1, 1]
    assert [t["logprob"] for t in tokens if t["mask"]] == [-0.1, -2.5, -0.012, -1.0, -0.5]
    assert {t["advantage"] for t in tokens if t["mask"]} == {0.75}  # index 0 won
    assert data["record"]["task_id"] == "lake-1-0" and data["record"]["details"] == {"holes": 1}

    html = client.get("/r/0/episode/1").text
    spans = re.findall(r'<span class="tok (m[01])"[^>]*title="([^"]*)"', html)
    assert [mask for mask, _ in spans] == [f"m{t['mask']}" for t in tokens]
    assert "log-prob -2.500" in spans[7][1] and "advantage +0.7500" in spans[7][1]
    assert "&lt;FrozenLake&gt;" in html and "<FrozenLake>" not in html  # text from the run is escaped
    assert 'data-tokens="13" data-trained="5"' in html
    # The estimator's value for each model turn, next to that turn.
    assert re.findall(r'step value ([+-][0-9.]+)', html) == ["+0.800", "+0.700"]
    assert "side by side" in html
    missing = client.get("/r/0/episode/999")
    assert missing.status_code == 404 and "no episode 999" in missing.text


def test_a_split_gateway_episode_shows_its_samples_together(run_dir: Path) -> None:
    # A gateway episode whose second call did not extend the first: two samples laid end to end in
    # one token block, `sample_starts` saying where each begins. A damaged value is ignored.
    split = record(1, 0)
    split["tokens"]["sample_starts"] = [0, 9]
    damaged = record(1, 1)
    damaged["tokens"]["sample_starts"] = [0, 99, "x"]
    append_jsonl(run_dir / EPISODES_FILE, [split, damaged])
    runs = open_runs([run_dir], min_interval_s=0)
    with ServerThread(create_app(runs)) as url, httpx.Client(base_url=url, timeout=20) as client:
        lines = listing(client)["total"]
        html = client.get(f"/r/0/episode/{lines - 1}").text
        box = html[html.index('<div class="tokens'):]
        spans = re.findall(r'<span class="tok (m[01]|msample)"[^>]*>([^<]*)</span>', box[:box.index("</div>")])
        assert [mask for mask, _ in spans].count("msample") == 1
        assert spans[9] == ("msample", "sample 2 of 2")  # before the token at position 9
        assert [mask for mask, _ in spans if mask != "msample"] == ["m0"] * 6 + ["m1"] * 3 + ["m0"] * 2 + ["m1"] * 2
        assert "<dt>samples</dt><dd>2:" in html
        damaged_html = client.get(f"/r/0/episode/{lines}").text
        damaged_box = damaged_html[damaged_html.index('<div class="tokens'):]
        assert "msample" not in damaged_box[:damaged_box.index("</div>")] and "<dt>samples</dt>" not in damaged_html


def test_group_side_by_side(client: httpx.Client) -> None:
    data = client.get("/r/0/api/group", params={"step": 2, "split": "train", "group": "0"}).json()
    assert len(data["episodes"]) == GROUP_SIZE
    assert [item["row"]["idx"] for item in data["episodes"]] == [0, 1, 2, 3]
    assert all(item["trained_tokens"] == 5 for item in data["episodes"])
    html = client.get("/r/0/group", params={"step": 2, "split": "train", "group": "0"}).text
    assert html.count('class="card"') == GROUP_SIZE
    assert client.get("/r/0/api/group", params={"step": "x"}).status_code == 400


def test_curves_and_spec(client: httpx.Client) -> None:
    curves = client.get("/r/0/api/curves").json()
    assert curves["train/success_rate"] == [[1, 0.1], [2, 0.2], [3, pytest.approx(0.3)]]
    html = client.get("/r/0/curves").text
    assert 'data-metric="train/reward_mean"' in html and "<svg" in html
    assert "name: viewtest" in client.get("/r/0/api/spec").json()["spec"]
    assert "model:" in client.get("/r/0/spec").text


def test_a_run_still_writing_shows_new_lines(run_dir: Path, client: httpx.Client) -> None:
    assert listing(client)["total"] == 24
    write_step(run_dir, 4)
    assert listing(client)["total"] == 32
    assert listing(client, step_min=4)["total"] == 8
    with (run_dir / EPISODES_FILE).open("a") as handle:  # half a line: being written now
        handle.write('{"step": 5, "split": "tr')
    after = listing(client)
    assert after["total"] == 32 and after["summary"]["torn_bytes"] > 0
    assert "unfinished" in client.get("/r/0/").text
    with (run_dir / EPISODES_FILE).open("a") as handle:  # ... and finished
        handle.write('ain", "index": 0, "group": 0, "task_id": "late", "turns": []}\n')
    after = listing(client)
    assert after["total"] == 33 and after["summary"]["torn_bytes"] == 0
    assert listing(client, task="late")["total"] == 1


def test_a_replaced_file_is_indexed_again(run_dir: Path, client: httpx.Client) -> None:
    assert listing(client)["total"] == 24
    (run_dir / EPISODES_FILE).unlink()
    append_jsonl(run_dir / EPISODES_FILE, [record(7, 0)])  # a new run in the same directory
    assert [row["step"] for row in listing(client)["episodes"]] == [7]


def test_a_corrupt_line_is_listed_as_such_and_the_rest_browsable(run_dir: Path) -> None:
    lines = (run_dir / EPISODES_FILE).read_text().splitlines(keepends=True)
    lines[3] = lines[3][: len(lines[3]) // 2] + "\n"  # torn mid-file (a killed run, then a resume appended)
    (run_dir / EPISODES_FILE).write_text("".join(lines) + '{"step": 9, "split": "train", "tokens": ')  # torn tail
    runs = open_runs([run_dir], min_interval_s=0)
    with ServerThread(create_app(runs)) as url, httpx.Client(base_url=url) as client:
        data = listing(client)
        assert data["total"] == 24 and data["summary"]["bad_lines"] == 1 and data["summary"]["torn_bytes"] > 0
        bad = listing(client, error=1)["episodes"]
        assert len(bad) == 1 and bad[0]["line"] == 4 and "cannot be read" in bad[0]["bad"]
        assert listing(client, error=0)["total"] == 23
        page = client.get("/r/0/").text
        assert "bad line" in page and "cannot be read" in page
        assert "cannot be read" in client.get(f"/r/0/episode/{bad[0]['id']}").text
        assert client.get("/r/0/episode/5").status_code == 200


def test_a_token_is_required_when_set(run_dir: Path) -> None:
    runs = open_runs([run_dir])
    with ServerThread(create_app(runs, token=TOKEN)) as url, httpx.Client(base_url=url) as client:
        assert client.get("/r/0/api/episodes").status_code == 401
        assert client.get("/r/0/api/episodes", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert client.get("/r/0/api/episodes", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
        first = client.get("/r/0/", params={"token": TOKEN})
        assert first.status_code == 200
        assert client.get("/r/0/episode/1").status_code == 200  # the cookie set by ?token= carries it on


def test_several_runs(tmp_path: Path) -> None:
    runs = open_runs([make_run(tmp_path / "a", steps=1), make_run(tmp_path / "b", steps=2)])
    with ServerThread(create_app(runs)) as url, httpx.Client(base_url=url) as client:
        assert [run["episodes"] for run in client.get("/api/runs").json()] == [8, 16]
        assert "/r/1/" in client.get("/").text
        assert client.get("/r/1/api/episodes").json()["total"] == 16
        assert client.get("/r/2/").status_code == 404


def test_a_run_without_episode_records_still_shows_curves(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "old")
    (run_dir / EPISODES_FILE).unlink()
    runs = open_runs([run_dir])
    with ServerThread(create_app(runs)) as url, httpx.Client(base_url=url) as client:
        assert "no <code>episodes.jsonl</code>" in client.get("/r/0/").text
        assert client.get("/r/0/api/curves").json()["train/reward_mean"]


def view_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "beyondagent_core.cli", "view", *args], capture_output=True,
                          text=True, timeout=60, env={**os.environ, **(env or {})})


def test_bad_run_dirs_and_an_open_host_without_token_are_clear_errors(tmp_path: Path) -> None:
    missing = view_cli(str(tmp_path / "nope"), "--no-browser")
    assert missing.returncode == 2 and "does not exist" in missing.stderr and "runs/quickstart" in missing.stderr
    make_run(tmp_path / "runs" / "first", steps=1)
    parent = view_cli(str(tmp_path / "runs"), "--no-browser")
    assert parent.returncode == 2 and "holds no run" in parent.stderr and "first" in parent.stderr
    open_host = view_cli(str(tmp_path / "runs" / "first"), "--host", "0.0.0.0", "--no-browser")
    assert open_host.returncode == 2 and "token is required" in open_host.stderr
    unset = view_cli(str(tmp_path / "runs" / "first"), "--token-env", "NO_SUCH_VIEW_TOKEN", "--no-browser")
    assert unset.returncode == 2 and "NO_SUCH_VIEW_TOKEN" in unset.stderr


def test_the_command_serves_and_prints_its_url(run_dir: Path) -> None:
    process = subprocess.Popen([sys.executable, "-m", "beyondagent_core.cli", "view", str(run_dir), "--no-browser"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/", line).group(0)
        assert httpx.get(url + "r/0/api/episodes", timeout=10).json()["total"] == 24
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert (run_dir / "view-index.sqlite").is_file()


def test_two_steps_compared_on_the_same_tasks(tmp_path: Path) -> None:
    run_dir = tmp_path / "cmp"
    run_dir.mkdir()
    # validation at steps 0 and 10 on the same 3 tasks (one episode each); task 2 learned, task 1 forgot
    for step, wins in ((0, {1}), (10, {2})):
        append_jsonl(run_dir / EPISODES_FILE, [
            {**record(step, index * GROUP_SIZE, split="val", success=index in wins), "task_id": f"val-{index}"}
            for index in range(3)])
    runs = open_runs([run_dir, make_run(tmp_path / "other")])
    with ServerThread(create_app(runs)) as url, httpx.Client(base_url=url) as client:
        result = client.get("/api/compare").json()  # default: the first and last val step of run 0
        assert (result["a"], result["b"], result["common"]) == ("0:0", "0:10", 3)
        assert (result["better"], result["worse"]) == (1, 1)
        deltas = {row["task_id"]: row["delta_reward"] for row in result["tasks"]}
        assert deltas == {"val-0": 0.0, "val-1": -1.5, "val-2": 1.5}
        html = client.get("/compare").text
        assert "3 tasks in common" in html and "+1.500" in html and "-1.500" in html
        across = client.get("/api/compare", params={"a": "1:1", "b": "1:3", "split": "train"}).json()
        assert across["common"] == 0 and across["tasks_a"] == 2  # other steps, other tasks
        assert "No task was recorded on both sides" in client.get(
            "/compare", params={"a": "1:1", "b": "1:3", "split": "train"}).text
        assert client.get("/api/compare", params={"a": "x", "b": "0:1"}).status_code == 400
        assert client.get("/api/compare", params={"a": "5:1", "b": "0:1"}).status_code == 404


def test_only_loopback_host_names_are_answered_without_a_token(client: httpx.Client) -> None:
    assert client.get("/r/0/api/episodes", headers={"host": "evil.example"}).status_code == 400
    assert client.get("/r/0/api/episodes", headers={"host": "localhost"}).status_code == 200


def test_the_spec_page_names_the_plugins(run_dir: Path) -> None:
    (run_dir / "plugins.json").write_text(json.dumps({
        "components": {"env": {"kind": "env", "name": "frozenlake", "distribution": "beyondagent-plugin-gym",
                               "version": "0.1.0"}},
        "plugins": [{"name": "gym", "distribution": "beyondagent-plugin-gym", "version": "0.1.0", "status": "ok"}]}))
    with ServerThread(create_app(open_runs([run_dir]))) as url:
        html = httpx.get(url + "/r/0/spec").text
    assert 'id="components"' in html and "beyondagent-plugin-gym" in html and "frozenlake" in html


def test_a_record_with_fields_of_the_wrong_type_never_breaks_a_page(run_dir: Path) -> None:
    weird = [{"step": "x", "tokens": {"mask": [None]}, "turns": "no"},  # cannot be indexed: a bad line
             {"step": 8, "split": "train", "group": 0, "task_id": "w", "score": "high", "turns": "no",
              "tokens": {"ids": [1], "vocab": "x", "mask": [0, 1], "logprobs": [0.1]}},  # tokens unreadable
             {"step": 8, "split": "train", "group": 0, "task_id": "w2", "tokens": [1, 2]}]
    append_jsonl(run_dir / EPISODES_FILE, weird)
    with ServerThread(create_app(open_runs([run_dir]))) as url, httpx.Client(base_url=url) as client:
        assert listing(client)["total"] == 27 and listing(client)["summary"]["bad_lines"] == 2
        for episode_id in (25, 26, 27):
            assert client.get(f"/r/0/episode/{episode_id}").status_code == 200
            assert client.get(f"/r/0/api/episodes/{episode_id}").status_code == 200
        assert "tokens.vocab an object" in client.get("/r/0/episode/26").text
        assert client.get("/r/0/group", params={"step": 8, "split": "train", "group": "0"}).status_code == 200
        assert client.get("/r/0/", params={"sort": "score"}).status_code == 200


def test_two_viewers_of_one_run_share_its_index_without_duplicates(run_dir: Path) -> None:
    from beyondagent_plugin_view.index import EpisodeIndex
    from beyondagent_plugin_view.queries import summary

    first, second = EpisodeIndex(run_dir, min_interval_s=0), EpisodeIndex(run_dir, min_interval_s=0)
    assert first.refresh() == 24 and second.refresh() == 0
    assert summary(second)["episodes"] == summary(first)["episodes"] == 24
    write_step(run_dir, 4)
    assert second.refresh() == 8 and first.refresh() == 0
    assert summary(first)["episodes"] == 32  # its remembered summary was dropped: the index moved on


def test_an_eval_directory_shows_its_samples_grouped_by_task(tmp_path: Path) -> None:
    from beyondagent_core.types import Reward, Task, Trajectory, Turn

    out = tmp_path / "eval" / "val-k2-abc"
    out.mkdir(parents=True)
    lines = []
    for task in ("t1", "t2"):
        for index in range(2):
            won = task == "t1" and index == 1
            trajectory = Trajectory(task=Task(task_id=task, env="frozenlake"),
                                    turns=[Turn("user", "go"), Turn("assistant", f"{task} try {index}", token_ids=[1])],
                                    reward=Reward(score=float(won), success=won, reason="r"))
            lines.append({"sample": {"task_id": task, "origin": "original", "index": index, "score": float(won),
                                     "success": won, "turns": 1, "error": None}, "trajectory": trajectory.to_dict()})
    append_jsonl(out / EPISODES_FILE, lines)
    with ServerThread(create_app(open_runs([out]))) as url, httpx.Client(base_url=url) as client:
        data = listing(client, success=1)
        assert data["total"] == 1 and data["episodes"][0]["task_id"] == "t1" and data["episodes"][0]["split"] == "eval"
        group = client.get("/r/0/api/group", params={"step": 0, "split": "eval", "group": "t1"}).json()
        assert len(group["episodes"]) == 2
        assert "t2 try 1" in client.get(f"/r/0/episode/{listing(client, task='t2')['episodes'][1]['id']}").text
        assert listing(client, q="try")["total"] == 4
