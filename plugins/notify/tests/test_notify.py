"""Notifications through apprise's real JSON target, received by an HTTP server on loopback.

Checked: a tiny-model training run sends "finished" with its numbers; a stall is reported once
and the finish after it too; a run that fails sends "failed"; settings come from the spec and the
environment; an unreachable or unknown target logs a warning and never fails the run; a URL
given literally or through `${oc.env:...}` is notified and written in none of the run's files.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from beyondagent_core.protocols import RunInfo
from beyondagent_plugin_notify import beyondagent_run_finished, beyondagent_run_started, beyondagent_step_finished
from beyondagent_plugin_notify.watch import settings_of

QUICKSTART = Path(__file__).resolve().parents[3] / "examples" / "quickstart.yaml"


class Inbox:
    """An HTTP server on 127.0.0.1 keeping every JSON body posted to it."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        inbox = self

        self.authorizations: list[str | None] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("Content-Length", 0))
                inbox.messages.append(json.loads(self.rfile.read(length)))
                inbox.authorizations.append(self.headers.get("Authorization"))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"json://127.0.0.1:{self.server.server_address[1]}/hook"

    def wait_for(self, count: int, seconds: float = 20.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + seconds
        while len(self.messages) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.messages


@pytest.fixture
def inbox() -> Any:
    box = Inbox()
    yield box
    box.server.shutdown()


def run_info(tmp_path: Path, settings: dict[str, Any]) -> RunInfo:
    return RunInfo(name="demo", run_dir=tmp_path, seed=0, spec={"plugins": {"settings": {"notify": settings}}})


@pytest.mark.beyondagent_plugins("gym", "mixers", "torch", "notify")
def test_a_training_run_sends_finished_with_its_numbers(run_spec, tmp_path, inbox) -> None:
    result = run_spec(QUICKSTART, "backend.total_steps=2", "backend.eval_every=0", "backend.save_every=0",
                      "algorithm.group_size=2", "tasks.train.count=2", "tasks.val.count=2",
                      f"run.output_dir={tmp_path}", f"plugins.settings.notify.urls=[{inbox.url}]")
    (message,) = inbox.wait_for(1)
    assert message["title"] == "beyondagent: run quickstart finished"
    assert "steps 2" in message["message"] and "train/success_rate" in message["message"]
    assert f"report: {result.run_dir / 'report.html'}" in message["message"]


@pytest.mark.parametrize("given", ["literal", "environment"])
@pytest.mark.beyondagent_plugins("gym", "mixers", "torch", "notify")
def test_a_url_is_notified_and_written_in_no_file_of_the_run(given, run_spec, tmp_path, inbox, monkeypatch) -> None:
    # The README's own example: the webhook (credentials in it) through ${oc.env:...}, or written out.
    url = inbox.url.replace("json://", "json://hook-user:hook-pass-42@")
    monkeypatch.setenv("BA_TEST_WEBHOOK_URL", url)
    spec = yaml.safe_load(QUICKSTART.read_text())
    spec["plugins"] = {"settings": {"notify": {"urls": [url if given == "literal" else "${oc.env:BA_TEST_WEBHOOK_URL}"],
                                               "stall_minutes": 0}}}
    result = run_spec(spec, "backend.total_steps=2", "backend.eval_every=0", "backend.save_every=1",
                      "algorithm.group_size=2", "tasks.train.count=2", "tasks.val.count=2",
                      f"run.output_dir={tmp_path}")
    (message,) = inbox.wait_for(1)
    assert message["title"] == "beyondagent: run quickstart finished"
    assert inbox.authorizations == ["Basic aG9vay11c2VyOmhvb2stcGFzcy00Mg=="]  # hook-user:hook-pass-42
    written = [path for path in result.run_dir.rglob("*") if path.is_file() and path.suffix in (".json", ".jsonl",
                                                                                                    ".yaml", ".html")]
    assert {"spec.resolved.yaml", "state.json", "events.jsonl"} <= {path.name for path in written}
    for path in written:
        text = path.read_text(errors="replace")
        for secret in (inbox.url.removeprefix("json://"), "hook-pass-42", "aG9vay11c2VyOmhvb2stcGFzcy00Mg"):
            assert secret not in text, f"{secret} in {path}"
    assert yaml.safe_load((result.run_dir / "spec.resolved.yaml").read_text())["plugins"]["settings"]["notify"][
        "urls"] == ["***"]


def test_a_stall_is_reported_once_then_the_finish(tmp_path, inbox) -> None:
    run = run_info(tmp_path, {"urls": [inbox.url], "stall_minutes": 0.01})  # 0.6 s
    beyondagent_run_started(run=run)
    beyondagent_step_finished(run=run, step=1, metrics={"train/reward_mean": 0.5})
    stalled = inbox.wait_for(1)
    assert stalled[0]["title"] == "beyondagent: run demo stalled" and "since step 1" in stalled[0]["message"]
    time.sleep(1.5)
    assert len(inbox.messages) == 1  # once per quiet spell
    beyondagent_run_finished(run=run, status="error", metrics={})
    failed = inbox.wait_for(2)[1]
    assert failed["title"] == "beyondagent: run demo failed" and "train/reward_mean 0.5" in failed["message"]


def test_urls_come_from_the_environment_and_masked_spec_values_are_ignored(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("BEYONDAGENT_NOTIFY_URLS", "json://a.example/x, ntfy://topic")
    settings = settings_of(run_info(tmp_path, {"urls": ["***", "json://b.example/y"], "events": ["failed"]}))
    assert settings.urls == ["json://b.example/y", "json://a.example/x", "ntfy://topic"]
    assert settings.events == ["failed"]


@pytest.mark.parametrize("block", [{"stall_minutes": -1}, {"events": ["done"]}, {"colour": "red"}])
def test_bad_settings_turn_notifications_off_with_a_warning(tmp_path, block) -> None:
    assert settings_of(run_info(tmp_path, {"urls": ["json://x/y"], **block})) is None


def test_a_target_that_is_down_never_fails_the_run(tmp_path) -> None:
    run = run_info(tmp_path, {"urls": ["json://127.0.0.1:9/nothing-listens", "not a url at all"],
                              "stall_minutes": 0})
    beyondagent_run_started(run=run)
    beyondagent_run_finished(run=run, status="ok", metrics={"steps": 3})  # logs a warning, raises nothing
    from beyondagent_plugin_notify.sender import send

    assert send(run.spec["plugins"]["settings"]["notify"]["urls"], "t", "b") is False
