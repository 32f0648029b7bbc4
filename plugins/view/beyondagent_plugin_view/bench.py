"""A benchmark of the viewer on a large run: `python -m beyondagent_plugin_view.bench OUT_DIR [--episodes N]`.

Writes N episode records (copies of a template record — by default one the writer builds with
450 tokens, about the size of a quickstart episode — with varied step, task, group, score and
text) to OUT_DIR/episodes.jsonl, then times the first index, an incremental refresh, and page
requests (list pages deep in the file, sorted, filtered, searched; one episode) against a real
server on loopback. Prints one JSON object with the numbers (docs/inspect.md quotes them).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path
from typing import Any

from beyondagent_core.episode_records import EPISODES_FILE, episode_record, token_view
from beyondagent_core.types import Reward, Task, Trajectory, Turn

WORDS = ("left", "right", "up", "down", "goal", "hole", "frozen", "lake", "move", "step", "action", "invalid")


def template_record(tokens: int = 450) -> dict[str, Any]:
    rng = random.Random(0)
    turns = [Turn("system", "You play FrozenLake on a 2x2 grid: walk from S to the goal G. " * 4),
             Turn("user", "Reach the goal G without falling into a hole.\nPF\nFG")]
    for _ in range(6):
        turns += [Turn("assistant", "Action: " + rng.choice(WORDS)), Turn("user", "You moved. " * 3)]
    mask = [0] * 230 + [1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0] * ((tokens - 230) // 15)
    mask += [0] * (tokens - len(mask))
    ids = [rng.randrange(1000) for _ in mask]
    pieces = [rng.choice(WORDS) for _ in mask]
    logprobs = [-rng.random() * 7 if bit else 0.0 for bit in mask]
    trajectory = Trajectory(task=Task(task_id="t", env="frozenlake"), turns=turns,
                            reward=Reward(score=-0.5, success=False, reason="did not reach the goal"),
                            terminated=True)
    return episode_record(step=1, split="train", index=0, group=0, trajectory=trajectory,
                          tokens=token_view(ids, mask, logprobs, [0.35] * len(mask), pieces))


def write_episodes(path: Path, count: int, template: dict[str, Any], *, group_size: int = 8) -> float:
    """Write `count` varied copies of `template`; returns the bytes per line."""
    rng = random.Random(1)
    written = 0
    with path.open("w", encoding="utf-8") as handle:
        for number in range(count):
            record = dict(template)
            step, position = divmod(number, 64)
            record.update(step=step + 1, index=position, group=position // group_size,
                          task_id=f"task-{(step * 8 + position // group_size) % 5000}",
                          score=round(rng.uniform(-0.6, 1.0), 3), success=rng.random() < 0.3,
                          error="env timed out" if rng.random() < 0.01 else None,
                          turns=[*template["turns"][:-1], {"role": "user", "content": " ".join(
                              rng.choice(WORDS) for _ in range(8)) + f" marker{number}"}])
            line = json.dumps(record, ensure_ascii=False) + "\n"
            handle.write(line)
            written += len(line.encode())
    return written / count


def get(url: str) -> bytes:
    """One GET on a new connection, the whole body read (http.client: no client setup in the timing;
    a kept-alive connection would add loopback's 40 ms delayed ACK, which browsers avoid)."""
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    try:
        connection.request("GET", parts.path + (f"?{parts.query}" if parts.query else ""))
        response = connection.getresponse()
        body = response.read()
        assert response.status == 200, (url, response.status)
        return body
    finally:
        connection.close()


def timed(url: str, repeat: int = 5) -> float:
    """The median milliseconds of `repeat` GETs of `url` (after one warm-up)."""
    get(url)
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        get(url)
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 1)


def _after_append(path: Path, template: dict[str, Any], url: str) -> float:
    """A list request that first indexes a step (64 lines) the run has just appended."""
    with path.open("a", encoding="utf-8") as handle:
        handle.write((json.dumps(template) + "\n") * 64)
    started = time.perf_counter()
    get(url)
    return round((time.perf_counter() - started) * 1000, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--episodes", type=int, default=100_000)
    parser.add_argument("--template", type=Path, help="take the first record of this episodes.jsonl as the template")
    args = parser.parse_args()
    from beyondagent_plugin_view.app import create_app, open_runs
    from beyondagent_plugin_view.command import ServerThread

    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / EPISODES_FILE
    template = (json.loads(args.template.read_text().splitlines()[0]) if args.template else template_record())
    started = time.perf_counter()
    per_line = write_episodes(path, args.episodes, template)
    results: dict[str, Any] = {"episodes": args.episodes, "bytes_per_episode": round(per_line),
                               "file_mb": round(path.stat().st_size / 2**20, 1),
                               "write_s": round(time.perf_counter() - started, 1)}
    for stale in args.out.glob("view-index.sqlite*"):
        stale.unlink()
    started = time.perf_counter()
    runs = open_runs([args.out], min_interval_s=0)
    results["first_index_s"] = round(time.perf_counter() - started, 1)
    results["index_mb"] = round(runs[0].index.path.stat().st_size / 2**20, 1)
    with path.open("a", encoding="utf-8") as handle:  # a run still writing: one more step
        handle.write((json.dumps(template) + "\n") * 64)
    started = time.perf_counter()
    results["refresh_new_lines"] = runs[0].index.refresh(force=True)
    results["refresh_ms"] = round((time.perf_counter() - started) * 1000, 1)
    with ServerThread(create_app(runs)) as url:
        pages = {
            "list_first_page": "/r/0/",
            "list_page_1000": "/r/0/?page=1000",
            "list_last_page": f"/r/0/?page={(args.episodes + 64) // 50 + 1}",
            "list_sorted_by_score_page_500": "/r/0/?sort=score&desc=1&page=500",
            "list_filtered_success_task": "/r/0/?success=1&task=task-42",
            "list_search": f"/r/0/?q=marker{args.episodes // 2}",
            "list_search_common_word_page_200": "/r/0/?q=frozen&page=200",
            "episode": f"/r/0/episode/{args.episodes // 2}",
            "group": "/r/0/group?step=700&split=train&group=3",
            "api_list": "/r/0/api/episodes?sort=tokens&page=300",
        }
        results["page_ms"] = {name: timed(url + target) for name, target in pages.items()}
        results["first_page_after_new_lines_ms"] = _after_append(path, template, url + "/r/0/")
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
