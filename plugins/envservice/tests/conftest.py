"""The env service's tests count log events (`capture_logs`), so each starts from structlog's
defaults and leaves the configuration as it found it: a test elsewhere in the suite that configured
logging at INFO (the CLI in-process) otherwise silently filtered the debug events counted here, and
these tests passed or failed by the order the suites ran in."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _structlog_defaults() -> Iterator[None]:
    import structlog

    saved = structlog.get_config()
    structlog.reset_defaults()
    yield
    structlog.configure(**saved)
