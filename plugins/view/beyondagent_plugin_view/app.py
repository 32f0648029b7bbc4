"""The viewer's Starlette app: HTML pages and the same data as JSON, for one or more run directories.

Routes (run `n` is the n-th RUN_DIR, from 0):

    /                                   the runs (redirects to /r/0/ when there is one)
    /r/{n}/                             episode list: ?split ?step_min ?step_max ?task ?origin ?group
                                        ?success=1|0 ?error=1|0 ?guided=1|0 ?q=text ?sort ?desc=1 ?page ?per_page
    /r/{n}/episode/{id}                 one episode          /r/{n}/group?step&split&group   a group
    /r/{n}/curves   /r/{n}/spec         curves, spec and plugins
    /compare?a=RUN:STEP&b=RUN:STEP&split=val   two steps or two runs on the same tasks
    /api/runs, /r/{n}/api/episodes, /r/{n}/api/episodes/{id}[?token_start=N], /r/{n}/api/group,
    /r/{n}/api/curves, /r/{n}/api/spec, /api/compare       the same as JSON

Every request first indexes what the run appended since the last one (`EpisodeIndex.refresh`).
Everything read from a run directory is untrusted (see `index`, `records`, `safe_files`): the
handlers are plain functions, so Starlette runs them in its thread pool and no request (a large
refresh, a long episode, the report's panels) blocks the event loop; what one request may ask for
is bounded (`bounds`); a number beyond 64 bits is a 400. HTML comes from the templates (`pages`),
with a Content-Security-Policy that lets only the viewer's own script run; JSON replies carry
no NaN or infinity (null instead). Access is `gate.Gate`'s: loopback host names, or the token.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import time
from pathlib import Path
from typing import Any

import attrs
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from beyondagent_core.episode_records import EPISODES_FILE
from beyondagent_core.logs import get_logger
from beyondagent_core.run_records import METRICS_FILE

from beyondagent_plugin_view import pages
from beyondagent_plugin_view.assets import SCRIPT
from beyondagent_plugin_view.bounds import (
    MAX_CARD_TOKENS,
    MAX_CHART_POINTS,
    MAX_CURVE_POINTS,
    MAX_GROUP_SHOWN,
    MAX_METRIC_RECORDS,
    MAX_METRICS_BYTES,
    MAX_SERIES,
    MAX_TEXT_FILE_BYTES,
    MAX_TOKENS_SHOWN,
    check_int64,
    int64,
    is_int64,
)
from beyondagent_plugin_view.charts import chart
from beyondagent_plugin_view.compare import compare, compare_page, default_sides, parse_side
from beyondagent_plugin_view.gate import Gate, check_token
from beyondagent_plugin_view.index import EpisodeIndex
from beyondagent_plugin_view.queries import ListQuery, choices, group_rows, list_episodes, summary
from beyondagent_plugin_view.records import finite, token_window
from beyondagent_plugin_view.safe_files import read_bounded, read_text, regular_or_missing

log = get_logger("beyondagent.view")

SPEC_FILE = "spec.resolved.yaml"
PLUGINS_FILE = "plugins.json"
SCRIPT_HASH = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
SECURITY_HEADERS = {
    # only the viewer's own inline script runs, whatever a run's text might smuggle into a page
    "content-security-policy": f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
                               f"script-src 'sha256-{SCRIPT_HASH}'; form-action 'self'; base-uri 'none'; "
                               "frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
}


class Page(HTMLResponse):
    """An HTML page with the security headers; text that is not valid UTF-8 (a lone surrogate from a
    JSON escape) is replaced, never an error."""

    def __init__(self, content: str, status_code: int = 200):
        super().__init__(content, status_code=status_code, headers=SECURITY_HEADERS)

    def render(self, content: Any) -> bytes:
        return content.encode("utf-8", errors="replace")


class Data(JSONResponse):
    """JSON without NaN or infinity (null instead: a run's numbers may be anything)."""

    def render(self, content: Any) -> bytes:
        return json.dumps(_finite(content), ensure_ascii=False, allow_nan=False,
                          separators=(",", ":")).encode("utf-8", errors="replace")


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


@attrs.define
class RunView:
    """One RUN_DIR being viewed."""

    number: int
    dir: Path
    index: EpisodeIndex

    @property
    def name(self) -> str:
        return self.dir.resolve().name

    @property
    def base(self) -> str:
        return f"/r/{self.number}"

    @property
    def has_episodes(self) -> bool:
        return os.path.lexists(self.dir / EPISODES_FILE)


def open_runs(run_dirs: list[Path], *, min_interval_s: float = 0.5) -> list[RunView]:
    """A `RunView` per directory, each index brought up to date (the first time, the whole file)."""
    runs = []
    for number, run_dir in enumerate(run_dirs):
        index = EpisodeIndex(run_dir, min_interval_s=min_interval_s)
        index.refresh(force=True)
        runs.append(RunView(number, Path(run_dir), index))
    return runs


def create_app(runs: list[RunView], *, token: str | None = None) -> Starlette:
    if token is not None:
        check_token(token)  # now, not at the first request
    def run_of(request: Request) -> RunView:
        number = check_int64(request.path_params["run"], "the run number")
        if not 0 <= number < len(runs):
            raise LookupError(f"there is no run {number}; runs are 0 to {len(runs) - 1}")
        run = runs[number]
        run.index.refresh()
        return run

    def home(request: Request) -> Response:
        if len(runs) == 1:
            return RedirectResponse(f"{runs[0].base}/", status_code=307)
        return Page(pages.runs_page(runs, [summary(run.index) for run in runs]))

    def api_runs(request: Request) -> Response:
        for run in runs:
            run.index.refresh()
        return Data([{"run": run.number, "name": run.name, "dir": str(run.dir), **summary(run.index)}
                     for run in runs])

    def listing(request: Request) -> tuple[RunView, ListQuery, list[dict[str, Any]], int, float]:
        run = run_of(request)
        started = time.perf_counter()
        query = ListQuery.from_params(request.query_params)
        rows, total = list_episodes(run.index, query)
        return run, query, rows, total, (time.perf_counter() - started) * 1000

    def episodes_html(request: Request) -> Response:
        run, query, rows, total, elapsed = listing(request)
        return Page(pages.list_page(run, query, rows, total, summary(run.index), choices(run.index),
                                    elapsed_ms=elapsed, runs=runs))

    def episodes_json(request: Request) -> Response:
        run, query, rows, total, elapsed = listing(request)
        return Data({"total": total, "page": query.page, "per_page": query.per_page,
                     "pages": max(1, math.ceil(total / query.per_page)), "query_ms": round(elapsed, 2),
                     "summary": summary(run.index), "episodes": rows})

    def one_episode(request: Request, start: int = 0) -> tuple[RunView, dict[str, Any], dict[str, Any], list[Any]]:
        run = run_of(request)
        episode = check_int64(request.path_params["id"], "the episode id")
        found = run.index.read(episode)
        if found is None:
            raise LookupError(f"run {run.number} has no episode {episode}")
        row, record = found
        tokens, _ = token_window(record, start, MAX_TOKENS_SHOWN)
        return run, row, record, tokens

    def episode_html(request: Request) -> Response:
        run, row, record, tokens = one_episode(request)
        return Page(pages.episode_page(run, row, record, tokens, runs=runs))

    def episode_json(request: Request) -> Response:
        start = int64(request.query_params.get("token_start", "0"), "?token_start=")
        run, row, record, tokens = one_episode(request, max(0, start))
        return Data({"row": row, "record": {k: v for k, v in record.items() if k != "tokens"},
                     "tokens": tokens, "token_start": max(0, start), "tokens_total": row["tokens"],
                     "token_error": row["bad"]})

    def group(request: Request) -> tuple[RunView, int, str, str, list[Any], bool]:
        run = run_of(request)
        params = request.query_params
        try:
            step = int(params.get("step", ""))
        except ValueError:
            raise ValueError("a group needs ?step=<int>&split=<name>&group=<id>") from None
        check_int64(step, "?step=")
        split, group_id = params.get("split", "train"), params.get("group", "")
        rows = group_rows(run.index, step, split, group_id)
        more = len(rows) > MAX_GROUP_SHOWN
        items = []
        for row in rows[:MAX_GROUP_SHOWN]:
            found = run.index.read(row["id"])
            if found is None:
                continue
            row, record = found
            block = record.get("tokens") if isinstance(record.get("tokens"), dict) else {}
            start = block.get("prompt_length") or 0
            tokens, _ = token_window(record, start, MAX_CARD_TOKENS)
            items.append((row, record, tokens, start))
        return run, step, split, group_id, items, more

    def group_html(request: Request) -> Response:
        run, step, split, group_id, items, more = group(request)
        return Page(pages.group_page(run, step, split, group_id, items, more=more, runs=runs))

    def group_json(request: Request) -> Response:
        run, step, split, group_id, items, more = group(request)
        return Data({"step": step, "split": split, "group": group_id, "more": more,
                     "episodes": [{"row": row, "trained_tokens": row["trained"]} for row, _, _, _ in items]})

    def curves_html(request: Request) -> Response:
        run = run_of(request)
        records, problem = read_metrics(run.dir)
        series, hidden = curves_of(run.dir, records)
        charts = [found for key, points in series.items()
                  if (found := chart(key, [s for s, _ in points], [v for _, v in points])) is not None]
        return Page(pages.curves_page(run, charts, report_panels(run.dir, records), problem=problem, hidden=hidden,
                                      limit=MAX_SERIES, runs=runs))

    def curves_json(request: Request) -> Response:
        run = run_of(request)
        series, _ = curves_of(run.dir, read_metrics(run.dir)[0])
        most = max(MAX_CHART_POINTS, MAX_CURVE_POINTS // max(1, len(series)))
        return Data({key: thinned(points, most) for key, points in series.items()})

    def spec_of(run: RunView) -> tuple[str | None, str | None, Any, str | None]:
        spec, spec_problem = read_text(run.dir / SPEC_FILE, MAX_TEXT_FILE_BYTES)
        raw, plugins_problem = read_text(run.dir / PLUGINS_FILE, MAX_TEXT_FILE_BYTES)
        plugins = None
        if raw is not None:
            try:
                plugins = json.loads(raw)
            except (ValueError, RecursionError):
                plugins_problem = f"{PLUGINS_FILE} is not JSON (or cut at {MAX_TEXT_FILE_BYTES} bytes)"
        return spec, spec_problem, plugins, plugins_problem

    def spec_html(request: Request) -> Response:
        run = run_of(request)
        return Page(pages.spec_page(run, *spec_of(run), runs=runs))

    def spec_json(request: Request) -> Response:
        spec, spec_problem, plugins, plugins_problem = spec_of(run_of(request))
        return Data({"spec": spec, "plugins": plugins, "problems": [p for p in (spec_problem, plugins_problem) if p]})

    def comparison(request: Request) -> dict[str, Any] | None:
        for run in runs:
            run.index.refresh()
        params = request.query_params
        split = params.get("split") or "val"
        if params.get("a") or params.get("b"):
            sides = (parse_side(params.get("a", ""), "a"), parse_side(params.get("b", ""), "b"))
        else:
            sides = default_sides(runs[0].index, split)
        return None if sides is None else compare(runs, sides[0], sides[1], split)

    def compare_html(request: Request) -> Response:
        return Page(compare_page(runs, comparison(request), request.query_params))

    def compare_json(request: Request) -> Response:
        return Data(comparison(request))

    async def healthz(request: Request) -> Response:
        return PlainTextResponse("OK")

    routes = [
        Route("/", home), Route("/api/runs", api_runs), Route("/healthz", healthz),
        Route("/r/{run:int}/", episodes_html), Route("/r/{run:int}/api/episodes", episodes_json),
        Route("/r/{run:int}/episode/{id:int}", episode_html), Route("/r/{run:int}/api/episodes/{id:int}", episode_json),
        Route("/r/{run:int}/group", group_html), Route("/r/{run:int}/api/group", group_json),
        Route("/r/{run:int}/curves", curves_html), Route("/r/{run:int}/api/curves", curves_json),
        Route("/r/{run:int}/spec", spec_html), Route("/r/{run:int}/api/spec", spec_json),
        Route("/compare", compare_html), Route("/api/compare", compare_json),
    ]

    async def not_found(request: Request, exc: Exception) -> Response:
        return _problem(request, 404, str(exc) if isinstance(exc, LookupError) else f"no page {request.url.path}")

    async def bad_request(request: Request, exc: Exception) -> Response:
        return _problem(request, 400, str(exc))

    return Starlette(routes=routes, middleware=[Middleware(Gate, token=token)],
                     exception_handlers={404: not_found, LookupError: not_found, ValueError: bad_request})


def _problem(request: Request, status: int, message: str) -> Response:
    if "/api/" in request.url.path:
        return Data({"error": message}, status_code=status)
    return Page(pages.error_page(message), status_code=status)


# -- metrics ------------------------------------------------------------------------------------

_METRICS: dict[Path, tuple[tuple[int, int], list[dict[str, Any]], str | None]] = {}


def read_metrics(run_dir: Path) -> tuple[list[dict[str, Any]], str | None]:
    """metrics.jsonl's records with a 64-bit integer step, read as untrusted (no symlink, at most
    MAX_METRICS_BYTES; bad lines skipped; at most MAX_METRIC_RECORDS of them, evenly spaced), and why
    it was not read (or was cut). Parsed again only when the file changed: what one request costs is
    bounded, and a page reloaded while nothing was appended costs nothing."""
    try:
        found = regular_or_missing(run_dir / METRICS_FILE)
    except OSError as exc:
        return [], str(exc)
    if found is None:
        return [], None
    key = (found.st_mtime_ns, found.st_size)
    cached = _METRICS.get(run_dir)
    if cached is not None and cached[0] == key:
        return cached[1], cached[2]
    records, problem = _parse_metrics(run_dir)
    _METRICS[run_dir] = (key, records, problem)
    return records, problem


_CURVES: dict[Path, tuple[int, tuple[dict[str, list[list[float]]], int]]] = {}


def curves_of(run_dir: Path, records: list[dict[str, Any]]) -> tuple[dict[str, list[list[float]]], int]:
    """`curves(records)`, computed once for each reading of the run's metrics (`read_metrics`)."""
    cached = _CURVES.get(run_dir)
    if cached is None or cached[0] != id(records) or _METRICS.get(run_dir, (None, None))[1] is not records:
        cached = _CURVES[run_dir] = (id(records), curves(records))
    return cached[1]


def thinned(items: list[Any], most: int) -> list[Any]:
    """At most `most` of `items` (about), evenly spaced, the first and the last kept."""
    if len(items) <= most:
        return items
    step = -(-len(items) // most)
    kept = items[::step]
    return kept if kept[-1] is items[-1] else [*kept, items[-1]]


def _parse_metrics(run_dir: Path) -> tuple[list[dict[str, Any]], str | None]:
    try:
        data, more = read_bounded(run_dir / METRICS_FILE, MAX_METRICS_BYTES)
    except FileNotFoundError:
        return [], None
    except OSError as exc:
        return [], str(exc)
    lines = data.splitlines()
    if more or not data.endswith(b"\n"):
        lines = lines[:-1]  # cut at the limit, or being written: the last line is not whole
    records = []
    for line in lines:
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(record, dict) and is_int64(record.get("step")):
            records.append(record)
    problems = [f"{METRICS_FILE} is larger than {MAX_METRICS_BYTES} bytes: its first part is shown"] if more else []
    if len(records) > MAX_METRIC_RECORDS:
        problems.append(f"{len(records)} records: {MAX_METRIC_RECORDS} of them, evenly spaced, are drawn")
        records = thinned(records, MAX_METRIC_RECORDS)
    return records, "; ".join(problems) or None


def curves(records: list[dict[str, Any]]) -> tuple[dict[str, list[list[float]]], int]:
    """Metric name -> [[step, value], ...] of the finite numbers (at most MAX_SERIES metrics), and
    how many metrics were left out."""
    found: dict[str, dict[int, float]] = {}
    left_out: set[str] = set()
    for record in records:
        for key, value in record.items():
            number = finite(value)
            if key in ("step", "time") or number is None:
                continue
            if key in found or len(found) < MAX_SERIES:
                found.setdefault(key, {})[record["step"]] = number
            else:
                left_out.add(key)
    series = {key: [[step, value] for step, value in sorted(points.items())] for key, points in sorted(found.items())}
    return series, len(left_out)


_PANELS: dict[Path, tuple[tuple[int, int], list[Any]]] = {}


def report_panels(run_dir: Path, records: list[dict[str, Any]]) -> list[Any]:
    """report.html's matplotlib panels, when matplotlib is installed and the run has metrics
    (drawn again only when metrics.jsonl changed; a run whose numbers the report cannot draw has none)."""
    try:
        found = regular_or_missing(run_dir / METRICS_FILE)
    except OSError:
        return []
    if found is None or not records:
        return []
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return []
    from beyondagent_plugin_report.report import draw_panels, merge_by_step

    key = (found.st_mtime_ns, found.st_size)
    cached = _PANELS.get(run_dir)
    if cached is None or cached[0] != key:
        try:
            panels = draw_panels(merge_by_step(records))
        except Exception as exc:  # noqa: BLE001 - a run's odd numbers cost its panels, never the page
            log.warning("view.panels_failed", run_dir=os.fspath(run_dir), error=f"{type(exc).__name__}: {exc}")
            panels = []
        _PANELS[run_dir] = cached = (key, panels)
    return cached[1]
