"""`beyondagent report RUN_DIR`: draw a run's report.html again from its records (any backend's run)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

REPORT_SUMMARY = "Draw a run's report.html again from its records."


def add_report_arguments(parser: argparse.ArgumentParser) -> Any:
    """The `report` command's arguments (the commands hook's factory); its handler."""
    parser.add_argument("run_dir", help="the run directory, e.g. runs/quickstart")
    return report_command


def report_command(args: argparse.Namespace) -> int:
    from beyondagent_core.errors import DataError
    from beyondagent_core.run_records import METRICS_FILE, SAMPLES_FILE

    run_dir = Path(args.run_dir)
    if not run_dir.is_dir() or not ((run_dir / METRICS_FILE).is_file() or (run_dir / SAMPLES_FILE).is_file()):
        raise DataError(f"{run_dir} is not a run directory: it has no {METRICS_FILE} or {SAMPLES_FILE}",
                        where=str(run_dir), hint="pass the directory a run wrote, e.g. runs/quickstart")
    try:
        import matplotlib  # noqa: F401 - the report draws its curves with it
    except ImportError:
        raise DataError("the report needs matplotlib", hint="pip install matplotlib") from None
    from beyondagent_plugin_report.report import write_report

    print(f"wrote {write_report(run_dir)}")
    return 0
