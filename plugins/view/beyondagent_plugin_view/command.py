"""The `beyondagent view` command: check the run directories, index them, serve, open the browser.

    beyondagent view RUN_DIR [RUN_DIR ...] [--host 127.0.0.1] [--port 0|N] [--no-browser] [--token-env VAR]

Loopback by default (any address in 127.0.0.0/8, `::1`, `localhost`). On any other address a
token is required (`--token-env VAR` names the environment variable holding it; never on the
command line, where `ps` shows it): any text of at least 16 characters; the printed URL carries
it once as `?token=`, then a cookie does. Served like the env service: a deadline on each
request's headers and a cap on connections (503 past it), so slow clients cannot hold it.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

from beyondagent_core.arguments import PORT
from beyondagent_core.episode_records import EPISODES_FILE
from beyondagent_core.errors import BeyondAgentError, DataError

HEADER_TIMEOUT = 10.0  # seconds for a request's headers (slowloris)
MAX_CONNECTIONS = 256
MAKE_TOKEN = 'python -c "import secrets; print(secrets.token_urlsafe(24))"'
RUN_MARKERS = (EPISODES_FILE, "metrics.jsonl", "spec.resolved.yaml", "samples.jsonl")  # eval dirs have episodes
WHERE = "beyondagent view"


def add_view_command(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    """The `beyondagent_commands` factory: `view`'s arguments on its parser; returns the handler."""
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories, e.g. runs/quickstart")
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=PORT, default=0, help="the port (default 0: a free one)")
    parser.add_argument("--no-browser", action="store_true", help="do not open a browser")
    parser.add_argument("--token-env", metavar="VAR",
                        help="require the token held in this environment variable (required off loopback)")
    return run_view_command


def check_run_dir(text: str) -> Path:
    """`text` as a run directory, or a DataError saying what is wrong and what to pass instead."""
    path = Path(text)
    if not path.exists():
        raise DataError(f"RUN_DIR {text} does not exist", where=WHERE,
                        hint="pass the directory a run wrote: <run.output_dir>/<run.name>, e.g. runs/quickstart")
    if not path.is_dir():
        raise DataError(f"RUN_DIR {text} is a file, not a run directory", where=WHERE,
                        hint="pass the directory that holds it, e.g. runs/quickstart")
    if not any((path / marker).is_file() for marker in RUN_MARKERS):
        runs = sorted(child.name for child in path.iterdir()
                      if child.is_dir() and any((child / marker).is_file() for marker in RUN_MARKERS))
        hint = (f"it holds the runs {', '.join(runs[:8])}: pass one of them, e.g. {path / runs[0]}" if runs else
                "pass the directory a run wrote (with metrics.jsonl / episodes.jsonl), e.g. runs/quickstart")
        raise DataError(f"RUN_DIR {text} holds no run: none of {', '.join(RUN_MARKERS)} is in it", where=WHERE,
                        hint=hint)
    return path


def read_token(var: str | None) -> str | None:
    """The token held in `$var` exactly as it is (any text), at least MIN_TOKEN_CHARS characters."""
    from beyondagent_plugin_view.gate import check_token  # starlette: not at start-up

    if var is None:
        return None
    token = os.environ.get(var, "")
    if not token:
        raise BeyondAgentError(f"--token-env {var}: the environment variable {var} is not set or empty",
                               where=WHERE, hint=f"export {var}=$({MAKE_TOKEN}) before starting the viewer")
    try:
        return check_token(token)
    except ValueError as exc:
        raise BeyondAgentError(f"--token-env {var}: {exc}", where=WHERE,
                               hint=f"export {var}=$({MAKE_TOKEN})") from None


def url_of(sock: socket.socket, host: str) -> str:
    port = sock.getsockname()[1]
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else ("localhost" if host == "::" else host)
    return f"http://[{shown}]:{port}" if ":" in shown else f"http://{shown}:{port}"


def run_view_command(args: argparse.Namespace) -> int:
    run_dirs = [check_run_dir(text) for text in args.run_dirs]
    token = read_token(args.token_env)
    from beyondagent_plugin_view.gate import is_loopback

    if not is_loopback(args.host) and token is None:
        raise BeyondAgentError(f"--host {args.host} is not a loopback address: anyone who can reach it could read "
                               "the runs, so a token is required", where=WHERE,
                               hint=f"export VIEW_TOKEN=$({MAKE_TOKEN}) and add --token-env VIEW_TOKEN, "
                                    "or keep the default --host 127.0.0.1 (ssh -L to reach it from elsewhere)")
    from beyondagent_core.serving import bind  # the env service's listener (starlette: not at start-up)

    try:
        sock = bind(args.host, args.port)
    except OSError as exc:
        raise BeyondAgentError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", where=WHERE,
                               hint="pick another --port (0 picks a free one)") from None
    from beyondagent_plugin_view.app import create_app, open_runs

    started = time.perf_counter()
    for run_dir in run_dirs:
        records = run_dir / EPISODES_FILE
        if records.is_file() and records.stat().st_size > 50 * 2**20:
            print(f"{run_dir}: indexing {records.stat().st_size / 2**20:.0f} MB of episodes (about 35 MB/s the first "
                  "time, then only what is appended)...", file=sys.stderr, flush=True)
    runs = open_runs(run_dirs)
    for run in runs:
        count = run.index.query("SELECT count(*) FROM episodes")[0][0]
        print(f"{run.dir}: {count} episodes indexed ({run.index.path})", file=sys.stderr)
        for note in (run.index.note, run.index.problem):
            if note:
                print(f"  note: {note}", file=sys.stderr)
    print(f"indexed in {time.perf_counter() - started:.1f}s", file=sys.stderr)
    app = create_app(runs, token=token)
    url = url_of(sock, args.host) + "/" + (f"?token={quote(token, safe='')}" if token else "")
    print(f"beyondagent view: {url}  (Ctrl-C stops it)", flush=True)
    if not args.no_browser:
        threading.Timer(0.5, _open_browser, args=(url,)).start()
    serve(app, sock)
    return 0


def _open_browser(url: str) -> None:
    import webbrowser

    try:
        webbrowser.open(url)
    except Exception:  # noqa: BLE001 - no browser is no reason to stop: the URL is printed
        pass


def serve(app: object, sock: socket.socket) -> None:
    import uvicorn

    uvicorn.Server(_config(app)).run(sockets=[sock])


def _config(app: object, *, header_timeout: float = HEADER_TIMEOUT, max_connections: int = MAX_CONNECTIONS) -> object:
    """uvicorn with the env service's guards: a deadline on request headers, a connection cap."""
    import importlib.util

    import uvicorn
    from uvicorn.config import HTTP_PROTOCOLS
    from uvicorn.importer import import_from_string

    from beyondagent_core.serving import guarded_protocol

    http = "httptools" if importlib.util.find_spec("httptools") else "h11"
    protocol = guarded_protocol(import_from_string(HTTP_PROTOCOLS[http]), header_timeout)
    return uvicorn.Config(app, http=protocol, limit_concurrency=max_connections, log_level="warning",
                          access_log=False, lifespan="off", proxy_headers=False)


class ServerThread:
    """The app served on a free loopback port in a daemon thread (tests, the benchmark):
    `with ServerThread(app) as url: ...` stops it on leaving."""

    def __init__(self, app: object, host: str = "127.0.0.1", *, header_timeout: float = HEADER_TIMEOUT,
                 max_connections: int = MAX_CONNECTIONS):
        import uvicorn

        from beyondagent_core.serving import bind

        self.sock = bind(host, 0)
        self.url = url_of(self.sock, host)
        self.server = uvicorn.Server(_config(app, header_timeout=header_timeout, max_connections=max_connections))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the viewer's server did not start within 10 s")
            time.sleep(0.01)
        return self.url

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()
