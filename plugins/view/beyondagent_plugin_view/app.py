"""The viewer's Starlette app: HTML pages and the same data as JSON, for one or more run directories.

Routes (run `n` is the n-th RUN_DIR, from 0):

    /                                   the runs (redirects to /r/0/ when there is one)
    /r/{n}/                             episode list: ?split ?step_min ?step_max ?task ?origin ?group
                                        ?success=1|0 ?error=1|0 ?guided=1|0 ?q=text ?sort ?desc=1 ?page ?per_page
    /r/{n}/episode/{id}                 one episode          /r/{n}/group?step&split&group   a group
    /r/{n}/curves   /r/{n}/spec         curves, spec and plugins
    /compare?a=RUN:STEP&b=RUN:STEP&split=val   two steps or two runs on the same tasks
    /api/runs, /r/{n}/api/episodes, /r/{n}/api/episodes/{id}, /r/{n}/api/group, /r/{n}/api/curves,
    /r/{n}/api/spec, /api/compare       the same as JSON

Every request first indexes what the run appended since the last one (`EpisodeIndex.refresh`).
With a token, every request needs it: `Authorization: Bearer <token>`, or `?token=<token>` once
(a cookie then carries it), compared in constant time. Without one, only requests naming a
loopback host are answered (a web page cannot reach the viewer through DNS rebinding).
"""

from __future__ import annotations

import hmac
import json
import math
import time
from pathlib import Path
from typing import Any

import attrs
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from beyondagent_core.episode_records import EPISODES_FILE, expand_tokens
from beyondagent_core.run_records import METRICS_FILE, read_metrics
from beyondagent_plugin_view import pages
from beyondagent_plugin_view.charts import line_chart
from beyondagent_plugin_view.compare import compare, compare_page, default_sides, parse_side
from beyondagent_plugin_view.index import EpisodeIndex
from beyondagent_plugin_view.queries import ListQuery, choices, group_rows, list_episodes, summary

SPEC_FILE = "spec.resolved.yaml"
PLUGINS_FILE = "plugins.json"
TOKEN_COOKIE = "beyondagent_view_token"
LOOPBACK_HOSTS = ["127.0.0.1", "localhost", "[::1]", "::1"]


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
        return (self.dir / EPISODES_FILE).is_file()


def open_runs(run_dirs: list[Path], *, min_interval_s: float = 0.5) -> list[RunView]:
    """A `RunView` per directory, each index brought up to date (the first time, the whole file)."""
    runs = []
    for number, run_dir in enumerate(run_dirs):
        index = EpisodeIndex(run_dir, min_interval_s=min_interval_s)
        index.refresh(force=True)
        runs.append(RunView(number, Path(run_dir), index))
    return runs


class TokenGate(BaseHTTPMiddleware):
    """Every request needs the token: a bearer header, `?token=` (then remembered in a cookie) or the cookie."""

    def __init__(self, app: Any, token: str):
        super().__init__(app)
        self.token = token.encode()

    def _matches(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.token)

    async def dispatch(self, request: Request, call_next: Any) -> Response:
        header = request.headers.get("authorization", "")
        bearer = header[7:] if header.lower().startswith("bearer ") else None
        by_query = self._matches(request.query_params.get("token"))
        if not (by_query or self._matches(bearer) or self._matches(request.cookies.get(TOKEN_COOKIE))):
            return PlainTextResponse("missing or wrong token: open the URL with ?token=<token> (printed at start) "
                                     "or send 'Authorization: Bearer <token>'", status_code=401,
                                     headers={"www-authenticate": "Bearer"})
        response = await call_next(request)
        if by_query:
            response.set_cookie(TOKEN_COOKIE, self.token.decode(), httponly=True, samesite="strict")
        return response


def create_app(runs: list[RunView], *, token: str | None = None) -> Starlette:
    def run_of(request: Request) -> RunView:
        number = request.path_params["run"]
        if not 0 <= number < len(runs):
            raise LookupError(f"there is no run {number}; runs are 0 to {len(runs) - 1}")
        run = runs[number]
        run.index.refresh()
        return run

    async def home(request: Request) -> Response:
        if len(runs) == 1:
            return RedirectResponse(f"{runs[0].base}/", status_code=307)
        return HTMLResponse(pages.runs_page(runs, [summary(run.index) for run in runs]))

    async def api_runs(request: Request) -> Response:
        for run in runs:
            run.index.refresh()
        return JSONResponse([{"run": run.number, "name": run.name, "dir": str(run.dir), **summary(run.index)}
                             for run in runs])

    def listing(request: Request) -> tuple[RunView, ListQuery, list[dict[str, Any]], int, float]:
        run = run_of(request)
        started = time.perf_counter()
        query = ListQuery.from_params(request.query_params)
        rows, total = list_episodes(run.index, query)
        return run, query, rows, total, (time.perf_counter() - started) * 1000

    async def episodes_html(request: Request) -> Response:
        run, query, rows, total, elapsed = listing(request)
        return HTMLResponse(pages.list_page(run, query, rows, total, summary(run.index), choices(run.index),
                                            elapsed_ms=elapsed, runs=runs))

    async def episodes_json(request: Request) -> Response:
        run, query, rows, total, elapsed = listing(request)
        return JSONResponse({"total": total, "page": query.page, "per_page": query.per_page,
                             "pages": max(1, math.ceil(total / query.per_page)), "query_ms": round(elapsed, 2),
                             "summary": summary(run.index), "episodes": rows})

    def one_episode(request: Request) -> tuple[RunView, dict[str, Any], dict[str, Any], list[Any], str | None]:
        run = run_of(request)
        found = run.index.read(request.path_params["id"])
        if found is None:
            raise LookupError(f"run {run.number} has no episode {request.path_params['id']}")
        row, record = found
        try:
            tokens, problem = expand_tokens(record), None
        except Exception as exc:  # noqa: BLE001 - a damaged record is shown as such, never a server error
            tokens, problem = [], f"the tokens of this record cannot be shown: {type(exc).__name__}: {exc}"
            record = {**record, "tokens": None}
        return run, row, record, tokens, problem

    async def episode_html(request: Request) -> Response:
        run, row, record, tokens, problem = one_episode(request)
        return HTMLResponse(pages.episode_page(run, row, record, tokens, problem, runs=runs))

    async def episode_json(request: Request) -> Response:
        run, row, record, tokens, problem = one_episode(request)
        return JSONResponse({"row": row, "record": {k: v for k, v in record.items() if k != "tokens"},
                             "tokens": tokens, "token_error": problem})

    def group(request: Request) -> tuple[RunView, int, str, str, list[Any]]:
        run = run_of(request)
        params = request.query_params
        try:
            step = int(params.get("step", ""))
        except ValueError:
            raise ValueError("a group needs ?step=<int>&split=<name>&group=<id>") from None
        split, group_id = params.get("split", "train"), params.get("group", "")
        items = []
        for row in group_rows(run.index, step, split, group_id):
            found = run.index.read(row["id"])
            if found is None:
                continue
            try:
                tokens = expand_tokens(found[1])
            except Exception:  # noqa: BLE001 - a damaged record shows without its tokens
                tokens = []
            items.append((row, found[1], tokens))
        return run, step, split, group_id, items

    async def group_html(request: Request) -> Response:
        run, step, split, group_id, items = group(request)
        return HTMLResponse(pages.group_page(run, step, split, group_id, items, runs=runs))

    async def group_json(request: Request) -> Response:
        run, step, split, group_id, items = group(request)
        return JSONResponse({"step": step, "split": split, "group": group_id,
                             "episodes": [{"row": row, "trained_tokens": sum(t["mask"] for t in tokens)}
                                          for row, _, tokens in items]})

    def curves(run: RunView) -> dict[str, list[list[float]]]:
        found: dict[str, dict[int, float]] = {}
        for record in read_metrics(run.dir):
            for key, value in record.items():
                if key not in ("step", "time") and isinstance(value, int | float) and not isinstance(value, bool) \
                        and math.isfinite(value):
                    found.setdefault(key, {})[record["step"]] = float(value)
        return {key: [[step, value] for step, value in sorted(points.items())] for key, points in sorted(found.items())}

    async def curves_html(request: Request) -> Response:
        run = run_of(request)
        series = curves(run)
        charts = [line_chart(key, [int(s) for s, _ in points], [v for _, v in points])
                  for key, points in series.items()]
        return HTMLResponse(pages.curves_page(run, charts, report_panels(run.dir), runs=runs))

    async def curves_json(request: Request) -> Response:
        return JSONResponse(curves(run_of(request)))

    def spec_of(run: RunView) -> tuple[str | None, Any]:
        spec_path, plugins_path = run.dir / SPEC_FILE, run.dir / PLUGINS_FILE
        spec = spec_path.read_text(encoding="utf-8", errors="replace") if spec_path.is_file() else None
        try:
            plugins = json.loads(plugins_path.read_text(encoding="utf-8")) if plugins_path.is_file() else None
        except ValueError:
            plugins = None
        return spec, plugins

    async def spec_html(request: Request) -> Response:
        run = run_of(request)
        return HTMLResponse(pages.spec_page(run, *spec_of(run), runs=runs))

    async def spec_json(request: Request) -> Response:
        spec, plugins = spec_of(run_of(request))
        return JSONResponse({"spec": spec, "plugins": plugins})

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

    async def compare_html(request: Request) -> Response:
        return HTMLResponse(compare_page(runs, comparison(request), request.query_params))

    async def compare_json(request: Request) -> Response:
        return JSONResponse(comparison(request))

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

    middleware = ([Middleware(TokenGate, token=token)] if token
                  else [Middleware(TrustedHostMiddleware, allowed_hosts=LOOPBACK_HOSTS)])
    return Starlette(routes=routes, middleware=middleware,
                     exception_handlers={404: not_found, LookupError: not_found, ValueError: bad_request})


def _problem(request: Request, status: int, message: str) -> Response:
    if "/api/" in request.url.path:
        return JSONResponse({"error": message}, status_code=status)
    return HTMLResponse(pages.page("error", f'<p class="notice">{pages.esc(message)}</p><p><a href="/">back</a></p>'),
                        status_code=status)


_PANELS: dict[Path, tuple[tuple[int, int], list[Any]]] = {}


def report_panels(run_dir: Path) -> list[Any]:
    """report.html's matplotlib panels, when matplotlib is installed and the run has metrics
    (drawn again only when metrics.jsonl changed)."""
    path = run_dir / METRICS_FILE
    if not path.is_file():
        return []
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return []
    from beyondagent_core.report import draw_panels, merge_by_step

    stat = path.stat()
    key = (stat.st_mtime_ns, stat.st_size)
    cached = _PANELS.get(path)
    if cached is None or cached[0] != key:
        _PANELS[path] = cached = (key, draw_panels(merge_by_step(read_metrics(run_dir))))
    return cached[1]
