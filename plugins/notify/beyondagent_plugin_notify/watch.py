"""One run's notifications: its settings, the stall watchdog, and the messages' text."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import attrs

from beyondagent_core.checks import MAX_SECONDS, SECONDS_WHY, FieldRangeError, number
from beyondagent_core.logs import get_logger
from beyondagent_core.secrets import MASK, remember

log = get_logger("beyondagent.notify")

ENV_URLS = "BEYONDAGENT_NOTIFY_URLS"
EVENTS = ("finished", "failed", "stalled")
HEADLINE = ("steps", "train/reward_mean", "train/success_rate", "val/pass@1", "val/reward_mean")


def _check_events(instance: Any, attribute: attrs.Attribute, value: list[str]) -> None:
    unknown = sorted(set(value) - set(EVENTS))
    if unknown:
        raise ValueError(f"events: unknown {', '.join(unknown)} (known: {', '.join(EVENTS)})")


def _check_urls(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    urls = [value] if isinstance(value, str) else value
    if not isinstance(urls, list) or not all(isinstance(url, str) for url in urls):
        raise ValueError(f"urls: a URL or a list of URLs, got {type(value).__name__}")


@attrs.define
class NotifySettings:
    """`plugins.settings.notify`: `urls` (one apprise URL or a list; $BEYONDAGENT_NOTIFY_URLS adds
    more), `stall_minutes` (a message when no step finishes for that long; 0: never), `events`."""

    urls: Any = attrs.field(factory=list, validator=_check_urls)  # a str or a list of str
    stall_minutes: float = attrs.field(default=30.0, validator=number(ge=0, le=MAX_SECONDS / 60, why=SECONDS_WHY))
    events: list[str] = attrs.field(factory=lambda: list(EVENTS), validator=_check_events)


def settings_of(run: Any) -> NotifySettings | None:
    """The run's settings (`plugins.settings.notify` and $BEYONDAGENT_NOTIFY_URLS); None if they are bad.

    The block comes from `run.plugin_settings`, the real values: in `run.spec` a URL is masked
    (`***`, like every secret there), and a masked URL cannot be contacted. Every URL is
    remembered as a secret, so apprise's errors and our warnings never show it.
    """
    block = dict(_block(getattr(run, "plugin_settings", None))
                 or _block((run.spec.get("plugins") or {}).get("settings")))
    env_urls = os.environ.get(ENV_URLS, "").replace(",", " ").split()
    given = block.pop("urls", None) or []
    if isinstance(given, str):  # one URL written without the list
        given = [given]
    urls = [url for url in given if url and url != MASK]
    if MASK in given:
        log.warning("notify.url_masked", count=given.count(MASK), where="plugins.settings.notify.urls",
                    hint="this run's caller passed the redacted spec only (RunInfo.plugin_settings is empty); "
                         f"set the URLs in ${ENV_URLS} instead")
    for url in [*urls, *env_urls]:
        remember(url)
    try:
        settings = NotifySettings(urls=[*urls, *env_urls], **block)
    except (TypeError, ValueError, FieldRangeError) as exc:
        log.warning("notify.bad_settings", error=str(exc), where="plugins.settings.notify",
                    hint=f"keys: urls, stall_minutes (>= 0), events ({', '.join(EVENTS)}); no notifications this run")
        return None
    return settings


def _block(settings: Any) -> dict[str, Any]:
    block = (settings or {}).get("notify") if isinstance(settings, dict) else None
    return block if isinstance(block, dict) else {}


def headline(metrics: dict[str, Any]) -> str:
    parts = [f"{key} {metrics[key]:.3g}" if isinstance(metrics[key], float) else f"{key} {metrics[key]}"
             for key in HEADLINE if key in metrics]
    return ", ".join(parts) or "no metrics"


class RunWatch:
    """Notifies about one run; a watchdog thread reports a stall once per quiet spell."""

    def __init__(self, run: Any, settings: NotifySettings):
        self.run, self.settings = run, settings
        self.started = self.last_step_at = time.monotonic()
        self.last_step: int | None = None
        self.last_metrics: dict[str, Any] = {}
        self._stalled = False
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if "stalled" in self.settings.events and self.settings.stall_minutes > 0:
            self._thread = threading.Thread(target=self._watch, name="notify-stall-watch", daemon=True)
            self._thread.start()

    def step(self, step: int, metrics: dict[str, Any]) -> None:
        self.last_step, self.last_metrics = step, dict(metrics)
        self.last_step_at = time.monotonic()
        self._stalled = False

    def finish(self, status: str, metrics: dict[str, Any]) -> None:
        self._done.set()
        event = "finished" if status == "ok" else "failed"
        if event not in self.settings.events:
            return
        minutes = (time.monotonic() - self.started) / 60
        report = Path(self.run.run_dir) / "report.html"
        body = [f"{headline({**self.last_metrics, **metrics})}", f"{minutes:.1f} min, run directory {self.run.run_dir}"]
        if report.is_file():
            body.append(f"report: {report}")
        if event == "failed":
            body.append("see events.jsonl in the run directory for the error")
        self.send(f"beyondagent: run {self.run.name} {event}", "\n".join(body))

    def _watch(self) -> None:
        limit = self.settings.stall_minutes * 60
        while not self._done.wait(timeout=min(limit / 4, 30.0)):
            quiet = time.monotonic() - self.last_step_at
            if quiet >= limit and not self._stalled:
                self._stalled = True
                after = "the start" if self.last_step is None else f"step {self.last_step}"
                self.send(f"beyondagent: run {self.run.name} stalled",
                          f"no training step for {quiet / 60:.1f} min (since {after}); run directory {self.run.run_dir}")

    def send(self, title: str, body: str) -> None:
        from beyondagent_plugin_notify.sender import send

        send(self.settings.urls, title, body)
