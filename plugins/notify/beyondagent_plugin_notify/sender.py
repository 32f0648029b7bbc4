"""Sending one message through apprise, bounded in time, never raising."""

from __future__ import annotations

import threading

from beyondagent_core.logs import get_logger

log = get_logger("beyondagent.notify")

SEND_SECONDS = 15.0


def send(urls: list[str], title: str, body: str, *, timeout: float = SEND_SECONDS) -> bool:
    """Send to every URL; True if apprise reports success. Waits at most `timeout` seconds."""
    result: dict[str, bool] = {}

    def deliver() -> None:
        try:
            import apprise

            notifier = apprise.Apprise()
            accepted = [url for url in urls if notifier.add(url)]
            if len(accepted) < len(urls):
                log.warning("notify.url_not_understood", count=len(urls) - len(accepted),
                            hint="see https://github.com/caronc/apprise/wiki for the URL of each service")
            result["ok"] = bool(accepted) and bool(notifier.notify(title=title, body=body))
        except Exception as exc:  # noqa: BLE001 - a notifier never fails the run
            log.warning("notify.failed", error=f"{type(exc).__name__}: {exc}")
            result["ok"] = False

    thread = threading.Thread(target=deliver, name="notify-send", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        log.warning("notify.timed_out", seconds=timeout, title=title)
        return False
    if not result.get("ok"):
        log.warning("notify.not_delivered", title=title, hint="check plugins.settings.notify.urls / "
                                                              "BEYONDAGENT_NOTIFY_URLS")
    return bool(result.get("ok"))
