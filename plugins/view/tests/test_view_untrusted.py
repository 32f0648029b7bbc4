"""`beyondagent view` pointed at a hostile run directory (issue 24, part 1): a real server on loopback.

Run directories are shared (tarred, copied from clusters), so everything in one is untrusted:
text is escaped by the templates only; an index shipped with the run, or one that no longer
matches its file, is rebuilt; symlinks are not followed; a read-only run's index lives in a
private per-user folder; one bad line is a bad record, never a dead viewer; big numbers are 400s;
slow clients are cut; the token is any text of 16 characters or more, its cookie the viewer's own;
127.0.0.2 is loopback.
"""

from __future__ import annotations

import json
import math
import os
import re
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from beyondagent_plugin_view import index as index_module
from beyondagent_plugin_view.app import create_app, open_runs
from beyondagent_plugin_view.command import ServerThread
from beyondagent_plugin_view.index import EpisodeIndex
from view_run_factory import make_run, record

from beyondagent_core.episode_records import EPISODES_FILE
from beyondagent_core.jsonl import append_jsonl

PACKAGE = Path(__file__).resolve().parents[1] / "beyondagent_plugin_view"
EVIL = '<x-evil a="1">'
HUGE = "9" * 30  # beyond 64 bits


def listing(client: httpx.Client, **params: object) -> dict:
    response = client.get("/r/0/api/episodes", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def hostile_run(run_dir: Path) -> Path:
    """A run whose every text field, token, metric name and spec holds markup."""
    run_dir.mkdir(parents=True)
    episode = record(1, 0)
    episode.update(task_id=EVIL, split=EVIL, origin=EVIL, group=EVIL, error=EVIL, reason=EVIL, env=EVIL, query=EVIL,
                   seed_task_id=EVIL, details={EVIL: EVIL}, terminated=EVIL)
    episode["turns"] = [{"role": EVIL, "content": EVIL, "tool_calls": [{"name": EVIL}]},
                        {"role": "assistant", "content": EVIL}]
    episode["tokens"]["vocab"] = {key: EVIL for key in episode["tokens"]["vocab"]}
    append_jsonl(run_dir / EPISODES_FILE, [episode])
    (run_dir / "metrics.jsonl").write_text(json.dumps({"step": 1, EVIL: 0.5}) + "\n" +
                                           json.dumps({"step": 2, EVIL: 0.7}) + "\n")
    (run_dir / "spec.resolved.yaml").write_text(f"run:\n  name: '{EVIL}'\n")
    (run_dir / "plugins.json").write_text(json.dumps({
        "components": {EVIL: {"kind": EVIL, "name": EVIL, "distribution": EVIL, "version": EVIL}},
        "plugins": [{"name": EVIL, "distribution": EVIL, "version": EVIL, "status": EVIL, "error": EVIL}]}))
    return run_dir


def test_every_value_of_a_hostile_run_is_escaped_by_the_templates(tmp_path: Path) -> None:
    hostile = hostile_run(tmp_path / EVIL.replace("/", ""))
    runs = open_runs([hostile, make_run(tmp_path / "plain")], min_interval_s=0)
    with ServerThread(create_app(runs)) as url, httpx.Client(base_url=url, timeout=20) as client:
        group = client.get("/r/0/api/episodes").json()["episodes"][0]["grp"]
        pages = [("/", {}), ("/r/0/", {}), ("/r/0/", {"error": 0}), ("/r/0/episode/1", {}), ("/r/0/curves", {}),
                 ("/r/0/spec", {}), ("/r/0/group", {"step": 1, "split": EVIL, "group": group}),
                 ("/compare", {"a": "0:1", "b": "0:1", "split": EVIL}), (f"/r/0/{EVIL}", {}), ("/compare", {"a": EVIL})]
        for path, params in pages:
            response = client.get(path, params=params)
            assert "<x-evil" not in response.text and "&lt;x-evil" in response.text, (path, params)
            assert response.headers["content-type"].startswith("text/html")
            assert "script-src 'sha256-" in response.headers["content-security-policy"], path
        assert "&lt;x-evil" in client.get("/r/0/episode/1").text
        assert client.get("/r/0/curves").text.count("&lt;x-evil") >= 2  # the chart's name and aria label


def test_html_is_built_only_in_the_autoescaping_templates() -> None:
    tag = re.compile(r"<(a|td|th|tr|span|div|p|pre|table|svg|circle|h\d|dl|dt|dd|form|input|select|option)[\s>]")
    hand_built = [path.name for path in PACKAGE.glob("*.py") if path.name != "assets.py"
                  and tag.search(path.read_text())]
    assert hand_built == []
    from beyondagent_plugin_view.pages import TEMPLATES

    assert TEMPLATES.autoescape is True


def plant_index(run_dir: Path, turns: str) -> None:
    """A view-index.sqlite as an attacker would ship it: the right schema and meta, rows of their making."""
    size = (run_dir / EPISODES_FILE).stat().st_size
    db = sqlite3.connect(run_dir / "view-index.sqlite")
    db.executescript(index_module.SCHEMA)
    db.execute("CREATE VIRTUAL TABLE search USING fts5(text, content='')")
    db.executemany("INSERT INTO meta VALUES (?, ?)", [("version", "1:1"), ("offset", str(size)), ("lines", "1")])
    db.execute("INSERT INTO episodes (line, offset, length, step, split, idx, grp, task_id, origin, score, success, "
               "turns, tokens, trained, error, guided, bad) VALUES (1, 0, 10, 1, 'train', 0, '0', 'lake', 'original', "
               "1.0, 1, ?, ?, 0, NULL, 0, NULL)", (turns, turns))
    db.commit()
    db.close()


def test_an_index_shipped_with_the_run_is_rebuilt_not_trusted(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "shipped")
    plant_index(run_dir, EVIL)
    with ServerThread(create_app(open_runs([run_dir]))) as url, httpx.Client(base_url=url, timeout=20) as client:
        assert listing(client)["total"] == 24  # the run's own lines, not the planted row
        assert "<x-evil" not in client.get("/r/0/").text
    not_a_database = make_run(tmp_path / "garbage")
    (not_a_database / "view-index.sqlite").write_bytes(b"not sqlite at all" * 100)
    assert EpisodeIndex(not_a_database).refresh(force=True) == 24


def test_an_index_that_no_longer_matches_its_file_is_rebuilt(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "rewritten")
    with ServerThread(create_app(open_runs([run_dir], min_interval_s=0))) as url, \
            httpx.Client(base_url=url, timeout=20) as client:
        assert listing(client, task="lake-3-1")["total"] == 4
        path = run_dir / EPISODES_FILE
        data = path.read_bytes()
        tail = data.rindex(b"lake-3-1")  # rewritten in place past the first 4 KB: same inode, same size
        with path.open("r+b") as handle:
            handle.seek(tail)
            handle.write(b"pond-3-1")
        assert listing(client, task="pond-3-1")["total"] == 1
        assert listing(client)["total"] == 24


def test_symlinks_and_fifos_in_a_run_are_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = {**record(1, 0), "task_id": "SECRET-TASK"}
    (outside / "episodes.jsonl").write_text(json.dumps(secret) + "\n")
    (outside / "id_rsa").write_text("SECRET-KEY\n")
    (outside / "metrics.jsonl").write_text(json.dumps({"step": 1, "SECRET_METRIC": 1.0}) + "\n")
    (outside / "target.sqlite").write_bytes(b"")
    run_dir = tmp_path / "linked"
    run_dir.mkdir()
    for name, target in (("episodes.jsonl", "episodes.jsonl"), ("spec.resolved.yaml", "id_rsa"),
                         ("plugins.json", "id_rsa"), ("metrics.jsonl", "metrics.jsonl"),
                         ("view-index.sqlite", "target.sqlite"), ("view-index.sqlite-wal", "id_rsa")):
        (run_dir / name).symlink_to(outside / target)
    runs = open_runs([run_dir])
    assert str(runs[0].index.path).startswith(os.environ["XDG_CACHE_HOME"])  # not through the planted links
    with ServerThread(create_app(runs)) as url, httpx.Client(base_url=url, timeout=20) as client:
        texts = [client.get(path).text for path in ("/r/0/", "/r/0/api/episodes", "/r/0/spec", "/r/0/api/spec",
                                                    "/r/0/curves", "/r/0/api/curves")]
        assert not any("SECRET" in text for text in texts)
        assert listing(client)["summary"]["problem"] == ("episodes.jsonl is a symbolic link: not followed (a run's "
                                                         "files are read as they are, never through a link)")
        assert "spec.resolved.yaml is a symbolic link: not followed" in texts[2]
        assert "metrics.jsonl is a symbolic link" in texts[4]
    assert (outside / "target.sqlite").read_bytes() == b"" and (outside / "id_rsa").read_text() == "SECRET-KEY\n"
    fifo_run = tmp_path / "fifo"
    fifo_run.mkdir()
    os.mkfifo(fifo_run / EPISODES_FILE)  # a FIFO would hang a plain open
    (fifo_run / "spec.resolved.yaml").write_text("run: {}\n")
    fifo_index = EpisodeIndex(fifo_run)
    assert fifo_index.refresh(force=True) == 0
    assert fifo_index.problem == "episodes.jsonl is not a regular file: not read"


def test_the_index_of_a_read_only_run_lives_in_a_private_per_user_folder(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = make_run(tmp_path / "readonly")
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    if os.geteuid() == 0:  # root writes anywhere: a read-only directory cannot exist for it here
        writable = os.access
        monkeypatch.setattr(index_module.os, "access", lambda path, mode: writable(path, mode)
                            and Path(path) != run_dir)
    else:
        run_dir.chmod(0o555)
    try:
        index = EpisodeIndex(run_dir)
        assert index.refresh(force=True) == 24
        folder = cache / "beyondagent" / "view"
        assert index.path.parent == folder and not (run_dir / "view-index.sqlite").exists()
        assert (folder.stat().st_mode & 0o777, folder.stat().st_uid) == (0o700, os.geteuid())
        index.close()
        folder.chmod(0o755)  # ours but loose: tightened
        EpisodeIndex(run_dir).close()
        assert folder.stat().st_mode & 0o777 == 0o700
        if os.geteuid() == 0:  # someone else's folder: refused, with what to do
            os.chown(folder, 65534, 65534)
            with pytest.raises(Exception, match="belongs to user id 65534, not to you"):
                EpisodeIndex(run_dir)
    finally:
        run_dir.chmod(0o755)


def bad_lines() -> list[str]:
    mask_of_200m = {**record(1, 1), "tokens": {**record(1, 1)["tokens"], "mask": [0, 200_000_000], "ids": [1, 2]}}
    infinite_mask = {**record(1, 2), "tokens": {**record(1, 2)["tokens"], "mask": [6, 1e400]}}
    nan_mask = {**record(1, 3), "tokens": {**record(1, 3)["tokens"], "mask": [float("nan")]}}
    return [json.dumps({**record(1, 0), "step": 2**70}), json.dumps(infinite_mask).replace("Infinity", "1e400"),
            json.dumps(nan_mask),
            "[" * 100_000 + "]" * 100_000, json.dumps(mask_of_200m),
            '{"step": 1, "split": "train", "task_id": "surrogate \\ud800", "turns": []}']


def test_one_bad_line_never_takes_the_viewer_down(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "bad", steps=1)
    good = {**record(2, 0), "details": {"x": float("nan"), "y": float("inf")}, "score": float("nan")}
    with (run_dir / EPISODES_FILE).open("a") as handle:
        handle.write("\n".join(bad_lines()) + "\n" + json.dumps(good) + "\n")
    with ServerThread(create_app(open_runs([run_dir]))) as url, httpx.Client(base_url=url, timeout=20) as client:
        data = listing(client)
        assert data["total"] == 8 + 7 and data["summary"]["bad_lines"] == 5
        bad = {row["line"]: row["bad"] for row in listing(client, error=1)["episodes"]}
        assert sorted(bad) == [9, 10, 11, 12, 13]
        assert all(text.startswith(f"episodes.jsonl line {line} cannot be read: ") for line, text in bad.items())
        assert "beyond the 64-bit integers" in bad[9] and "not a count" in bad[10] and "not a count" in bad[11]
        assert "nested too deeply" in bad[12] and "claims 200000000 positions" in bad[13]
        for episode in range(1, 16):
            assert client.get(f"/r/0/episode/{episode}").status_code == 200
            assert client.get(f"/r/0/api/episodes/{episode}").status_code == 200
        assert listing(client, task="surrogate \ufffd")["total"] == 1
        reply = client.get("/r/0/api/episodes/15").json()
        assert reply["record"]["details"] == {"x": None, "y": None} and reply["row"]["score"] is None
        assert client.get("/r/0/", params={"sort": "score"}).status_code == 200


def test_a_line_past_the_size_limit_is_a_bad_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index_module, "MAX_LINE_BYTES", 2000)
    monkeypatch.setattr(index_module, "CHUNK_BYTES", 512)  # the long line spans several reads
    run_dir = make_run(tmp_path / "long", steps=1)
    with (run_dir / EPISODES_FILE).open("a") as handle:
        handle.write(json.dumps({**record(2, 0), "reason": "x" * 5000}) + "\n" + json.dumps(record(2, 1)) + "\n")
    index = EpisodeIndex(run_dir)
    assert index.refresh(force=True) == 10
    rows = index.query("SELECT line, bad FROM episodes WHERE line > 8 ORDER BY line")
    assert rows[0][0] == 9 and "longer than the limit of 2000 bytes" in rows[0][1] and rows[1] == (10, None)
    assert index.read(10)[1]["index"] == 1


def test_no_request_blocks_the_event_loop(tmp_path: Path) -> None:
    runs = open_runs([make_run(tmp_path / "busy")], min_interval_s=0)
    with ServerThread(create_app(runs)) as url:
        answers: list[int] = []
        with runs[0].index._lock:  # a refresh of a long append holds the index this long
            request = threading.Thread(target=lambda: answers.append(httpx.get(f"{url}/r/0/api/episodes",
                                                                              timeout=30).status_code))
            request.start()
            time.sleep(0.3)
            started = time.monotonic()
            assert httpx.get(f"{url}/healthz", timeout=5).text == "OK"  # served while that request waits
            assert time.monotonic() - started < 2
        request.join(timeout=30)
        assert answers == [200]


def test_numbers_beyond_64_bits_are_400s(tmp_path: Path) -> None:
    with ServerThread(create_app(open_runs([make_run(tmp_path / "big")]))) as url, \
            httpx.Client(base_url=url, timeout=20) as client:
        for path in (f"/r/0/episode/{HUGE}", f"/r/0/api/episodes/{HUGE}", f"/r/{HUGE}/", f"/r/0/?step_min={HUGE}",
                     f"/r/0/api/episodes?page={HUGE}", f"/r/0/api/episodes?step_max=-{HUGE}",
                     f"/r/0/api/group?step={HUGE}&split=train&group=0", f"/api/compare?a=0:{HUGE}&b=0:1",
                     f"/r/0/api/episodes/1?token_start={HUGE}"):
            response = client.get(path)
            assert response.status_code == 400, (path, response.status_code, response.text[:300])
            assert "64 bits" in response.text, path
        assert listing(client, page=2**62)["episodes"] == []  # in range: an empty page, not an overflow


def address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname, parts.port


def closed_within(sock: socket.socket, seconds: float) -> bool:
    sock.settimeout(seconds)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_slow_headers_are_cut_and_connections_are_capped(tmp_path: Path) -> None:
    app = create_app(open_runs([make_run(tmp_path / "slow", steps=1)]))
    with ServerThread(app, header_timeout=0.5, max_connections=4) as url:
        slow = socket.create_connection(address(url))
        slow.sendall(b"GET /r/0/ HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never finished
        assert httpx.get(f"{url}/healthz", timeout=5).text == "OK"
        assert closed_within(slow, 10)
        slow.close()
        idle = [socket.create_connection(address(url)) for _ in range(4)]
        time.sleep(0.2)
        assert httpx.get(f"{url}/healthz", timeout=10).status_code == 503
        for sock in idle:
            sock.close()


def view_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "beyondagent_core.cli", "view", *args], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})


class Served:
    """`beyondagent view ...` running; `url` is the URL it printed."""

    def __init__(self, *args: str, env: dict[str, str] | None = None):
        self.process = subprocess.Popen([sys.executable, "-m", "beyondagent_core.cli", "view", *args, "--no-browser"],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                        env={**os.environ, **(env or {})})

    def __enter__(self) -> str:
        line = self.process.stdout.readline()
        found = re.search(r"(http://\S+)", line)
        assert found, line + self.process.stderr.read()
        return found.group(1)

    def __exit__(self, *exc: object) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def test_a_token_is_at_least_16_characters_of_any_text(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "tok", steps=1)
    short = view_cli(str(run_dir), "--token-env", "VIEW_TOKEN", "--no-browser", env={"VIEW_TOKEN": "fifteen-chars!!"})
    assert short.returncode == 2 and "at least 16" in short.stderr
    token = "pässwörd & more #1 ?x=y"
    with Served(str(run_dir), "--token-env", "VIEW_TOKEN", env={"VIEW_TOKEN": token}) as url:
        assert "#" not in url and " " not in url  # the token is quoted in the printed URL
        with httpx.Client(timeout=20) as client:
            first = client.get(url)
            assert first.status_code == 307  # to the one run, with the cookie
            port = urlsplit(url).port
            cookie = first.headers["set-cookie"]
            assert cookie.startswith(f"beyondagent_view_{port}=") and "HttpOnly" in cookie and "Path=/" in cookie
            assert "pässwörd" not in cookie and "p%C3%A4ss" not in cookie  # an HMAC of the token, not the token
            assert client.get(url.split("?")[0] + "r/0/api/episodes").status_code == 200  # the cookie carries it
        base = url.split("?")[0]
        utf8 = {"Authorization": b"Bearer " + token.encode()}
        assert httpx.get(base + "r/0/api/episodes", headers=utf8, timeout=20).status_code == 200
        assert httpx.get(base + "r/0/api/episodes", headers={"Authorization": "Bearer pässwörd".encode()},
                         timeout=20).status_code == 401
        other_port = {f"beyondagent_view_{urlsplit(url).port + 1}": "x"}
        assert httpx.get(base + "r/0/api/episodes", cookies=other_port, timeout=20).status_code == 401


def test_127_0_0_2_is_loopback(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "lo", steps=1)
    with Served(str(run_dir), "--host", "127.0.0.2") as url:
        assert url.startswith("http://127.0.0.2:")
        assert httpx.get(url + "r/0/api/episodes", timeout=20).json()["total"] == 8
    with ServerThread(create_app(open_runs([run_dir]))) as url, httpx.Client(base_url=url, timeout=20) as client:
        for host in ("127.0.0.2", "127.0.0.2:8080", "[::1]:8080", "LOCALHOST"):
            assert client.get("/healthz", headers={"host": host}).status_code == 200, host
        for host in ("127.0.0.2.evil.example", "localhost.evil.example", "10.0.0.1"):
            assert client.get("/healthz", headers={"host": host}).status_code == 400, host


def test_scores_of_any_size_are_shown(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "scores", steps=1)
    append_jsonl(run_dir / EPISODES_FILE, [{**record(2, 0), "score": 10**400}, {**record(2, 1), "score": 1e308}])
    with ServerThread(create_app(open_runs([run_dir]))) as url, httpx.Client(base_url=url, timeout=20) as client:
        scores = [row["score"] for row in listing(client, step_min=2)["episodes"]]
        assert scores[0] is None and math.isclose(scores[1], 1e308)
        assert client.get("/r/0/episode/9").status_code == 200
        assert client.get("/r/0/group", params={"step": 2, "split": "train", "group": 0}).status_code == 200
