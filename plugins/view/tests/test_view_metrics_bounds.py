"""A planted 90 MB metrics.jsonl costs the viewer a bounded amount of work per request (issue 36, item 5).

Before, every /curves and /api/curves request parsed up to 64 MB of it again, answered /api/curves
with every point (tens of MB of JSON) and drew the report's panels from every record: 45-61 s of CPU
per page. Now the viewer reads at most MAX_METRICS_BYTES, keeps at most MAX_METRIC_RECORDS records
evenly spaced, parses again only when the file changed, and an /api/curves reply holds at most
MAX_CURVE_POINTS points (each series at least a chart's worth).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from beyondagent_plugin_view import app as app_module
from beyondagent_plugin_view.app import create_app, open_runs
from beyondagent_plugin_view.bounds import MAX_CURVE_POINTS, MAX_METRIC_RECORDS
from starlette.testclient import TestClient
from view_run_factory import make_run

METRICS = 10


def plant_metrics(run_dir: Path, megabytes: int = 90) -> int:
    """`megabytes` of well-formed metrics lines (one step each); the number of lines."""
    lines = []
    size = 0
    step = 0
    while size < megabytes * 2**20:
        line = json.dumps({"step": step, "time": 1.0 + step, **{f"train/m{i}": (step % 97) / 97 for i in range(METRICS)}})
        lines.append(line)
        size += len(line) + 1
        step += 1
    (run_dir / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    return step


def test_a_huge_metrics_file_costs_a_bounded_amount_per_request(tmp_path: Path, monkeypatch) -> None:
    run_dir = make_run(tmp_path / "big")
    planted = plant_metrics(run_dir)
    parsed = []
    parse = app_module._parse_metrics
    monkeypatch.setattr(app_module, "_parse_metrics", lambda path: parsed.append(path) or parse(path))
    client = TestClient(create_app(open_runs([run_dir], min_interval_s=0)), base_url="http://127.0.0.1")
    started = time.process_time()
    reply = client.get("/r/0/api/curves")
    assert reply.status_code == 200
    series = reply.json()
    assert len(series) == METRICS and sum(len(points) for points in series.values()) <= MAX_CURVE_POINTS
    assert all(points[0][0] == 0 for points in series.values())  # evenly spaced from the first record...
    records, problem = app_module.read_metrics(run_dir)
    assert len(records) <= MAX_METRIC_RECORDS + 1 and records[-1]["step"] == series["train/m0"][-1][0]
    assert "its first part is shown" in problem and "evenly spaced" in problem
    for _ in range(2):
        page = client.get("/r/0/curves")
        assert page.status_code == 200 and "evenly spaced" in page.text
    cpu = time.process_time() - started
    print(f"{planted} planted lines: 1 API reply + 2 pages in {cpu:.1f} s of CPU; parsed {len(parsed)} time(s)")
    assert len(parsed) == 1  # the file did not change: parsed once for all three requests
    assert cpu < 15, cpu  # was 45-61 s for one page; about 2 s here
