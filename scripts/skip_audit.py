"""A pytest plugin for CI: a skip that should not happen on a machine with everything installed fails the run.

Loaded by scripts/test.sh (`-p skip_audit`); active only with BEYONDAGENT_FAIL_ON_SKIP=1 (.ci/run sets
it). Every skip's reason is matched against `EXPECTED` — skips that are right on any machine, each with
why — and any other skip (a plugin that did not install, an `importorskip` that hid a broken import, a
venv that was not built) is listed and the session's exit status set to 1. A developer's machine,
without the variable, only gets the list.
"""

from __future__ import annotations

import os
import re
from typing import Any

# reason pattern -> why skipping is right even in CI
EXPECTED: dict[str, str] = {
    r"sentence-transformers is installed here": "the message for a missing package cannot be shown where it is installed",
    r"does not keep trajectories for prefix sampling": "the experience contract's prefix test, for a store without "
                                                      "examples_of (the lessons-only store)",
    r"takes no `index`": "the explorer contract's repeat test, for an explorer without an index",
    r"this machine has CUDA": "the CPU-only message cannot be shown on a CUDA machine",
    r"^needs CUDA$": "a CUDA-only check on a machine without a GPU (CI has none)",
    r"needs a machine without CUDA": "a CPU-only check on a machine with a GPU",
    r"no chromium at": "the viewer's browser test: .ci/run installs chromium best-effort and warns when it cannot",
    r"no isolation on this machine": "the math sandbox's isolation needs unprivileged user namespaces, which a "
                                     "container may forbid",
}
_unexpected: list[tuple[str, str]] = []


def _reason(report: Any) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def pytest_runtest_logreport(report: Any) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = _reason(report)
        if not any(re.search(pattern, reason) for pattern in EXPECTED):
            _unexpected.append((report.nodeid, reason))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _unexpected:
        return
    enforced = os.environ.get("BEYONDAGENT_FAIL_ON_SKIP") == "1"
    terminalreporter.section("skips that should not happen here" + (" (failing the run)" if enforced else ""))
    for nodeid, reason in _unexpected:
        terminalreporter.write_line(f"{nodeid}: {reason}")


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    if _unexpected and os.environ.get("BEYONDAGENT_FAIL_ON_SKIP") == "1" and exitstatus == 0:
        session.exitstatus = 1
