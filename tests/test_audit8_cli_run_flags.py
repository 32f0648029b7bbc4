"""`beyondagent run`'s flags reach the run, and a Ctrl-C outside a run still exits 130 (eighth audit).

- `--resume` reaches `pipeline.run`: with no run directory it is refused ("nothing to resume",
  exit 1); after a run it continues it, so `reproduce.json` keeps the first run's record under
  `earlier` (a run without `--resume` starts that file afresh).
- A parquet task file whose row cannot be read (here `extra_info.beyondagent_task` holds a struct,
  not the JSON text of a Task) is a bad record named by its row: exit 2 by default, counted and
  left out with `--on-bad-record skip`; never an internal error.
- A plugin command interrupted by Ctrl-C (a plain KeyboardInterrupt, not a run's `Interrupted`)
  exits 130 and says so.

The CLI's `main` in-process; plugins come from entry points made here, as in
test_plugin_command_missing.py.
"""

from __future__ import annotations

import json
import textwrap
from importlib import metadata
from pathlib import Path

import pytest
from spec_files import write_basic_spec

from beyondagent_core import cli, plugins

STOPPING_COMMAND = '''
from beyondagent_core import CommandSpec, hookimpl


def add_stop(parser):
    parser.add_argument("--message", default="")

    def handler(args):
        raise KeyboardInterrupt(args.message) if args.message else KeyboardInterrupt()
    return handler


@hookimpl
def beyondagent_commands():
    return [CommandSpec(name="audit8-stop", factory=add_stop, summary="Stop as Ctrl-C would.")]
'''


def test_resume_reaches_the_run(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    spec = write_basic_spec(tmp_path, mixer="original", tasks=2, run_name="resumable")
    run_dir = tmp_path / "runs" / "resumable"

    assert cli.main(["run", str(spec), "--resume"]) == 1  # nothing to continue yet
    assert "nothing to resume" in capsys.readouterr().err and not run_dir.exists()

    assert cli.main(["run", str(spec)]) == 0
    assert "earlier" not in json.loads((run_dir / "reproduce.json").read_text())

    assert cli.main(["run", str(spec), "--resume"]) == 0
    record = json.loads((run_dir / "reproduce.json").read_text())
    assert len(record["earlier"]) == 1 and record["earlier"][0]["seed"] == record["seed"]

    assert cli.main(["run", str(spec)]) == 0  # a fresh run keeps no earlier record
    assert "earlier" not in json.loads((run_dir / "reproduce.json").read_text())


def test_an_unreadable_parquet_row_is_a_bad_record_named_by_its_row(tmp_path: Path, capsys) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq
    import yaml

    prompt = [{"role": "user", "content": "What is 1+1?"}]
    rows = [
        {"data_source": "sums", "prompt": prompt, "reward_model": {"style": "rule", "ground_truth": "2"},
         "extra_info": {"index": 0, "beyondagent_task": None}},
        {"data_source": "sums", "prompt": prompt, "reward_model": {"style": "rule", "ground_truth": "2"},
         "extra_info": {"index": 1, "beyondagent_task": {"task_id": "as-a-struct"}}},
    ]
    data = tmp_path / "train.parquet"
    pq.write_table(pa.Table.from_pylist(rows), data)
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({
        "run": {"name": "pq", "output_dir": str(tmp_path / "runs")},
        "tasks": {"train": {"name": "parquet", "path": str(data)}},
        "mixture": {"name": "original"},
        "backend": {"name": "export"},
    }))

    assert cli.main(["run", str(spec), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "malformed record" in err and f"{data} row 1" in err and "internal error" not in err

    assert cli.main(["run", str(spec), "--dry-run", "--on-bad-record", "skip"]) == 0
    out = capsys.readouterr().out
    assert "original tasks: 1 " in out


def only_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str, source: str) -> None:
    """Make the plugin module `module` (its text `source`, written under tmp_path) the only one installed."""
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("BEYONDAGENT_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.delenv("BEYONDAGENT_PLUGINS", raising=False)
    point = metadata.EntryPoint(name=module.replace("_", ""), value=module, group=plugins.ENTRY_POINT_GROUP)
    monkeypatch.setattr(plugins, "_entry_points", lambda: [point])


def test_ctrl_c_in_a_plugin_command_exits_130(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    only_plugin(tmp_path, monkeypatch, "audit8_stopping_plugin", STOPPING_COMMAND)

    assert cli.main(["audit8-stop"]) == 130
    assert capsys.readouterr().err.strip() == "interrupted"
    assert cli.main(["audit8-stop", "--message", "at task 3 of 9"]) == 130
    assert capsys.readouterr().err.strip() == "interrupted: at task 3 of 9"
