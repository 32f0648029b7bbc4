"""The `beyondagent` CLI on good input: version, plugin listings, validate, dry runs, imports.

(Bad input and its messages are in test_cli_errors.py.) Each test runs the real CLI in a
subprocess through the `cli` fixture of conftest.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from spec_files import write_basic_spec

from beyondagent_core import __version__

ROOT = Path(__file__).resolve().parents[1]

MIXER = '''
from beyondagent_core import MixerSpec, hookimpl

class Keep:
    def __init__(self, config):
        pass
    def mix(self, original, synthetic, *, epoch, seed):
        return list(original)

@hookimpl
def beyondagent_mixers():
    return [MixerSpec(name="keep", factory=Keep, summary="The originals.")]
'''

EXPLODING_BACKEND = '''
from beyondagent_core import BackendSpec, hookimpl

class Exploding:
    def __init__(self, config):
        pass
    def train(self, data, run):
        raise OSError("GPU melted")

@hookimpl
def beyondagent_backends():
    return [BackendSpec(name="exploding", factory=Exploding)]
'''

DESCRIBING_BACKEND = '''
from beyondagent_core import BackendSpec, hookimpl

class Describing:
    def __init__(self, config):
        pass
    def describe(self, run):
        (run.run_dir / "other_config.yaml").write_text("trainer: {steps: 3}\\n")
        return f"other system's config: trainer.steps=3 (written to {run.run_dir / 'other_config.yaml'})"
    def train(self, data, run):
        return {}

@hookimpl
def beyondagent_backends():
    return [BackendSpec(name="describing", factory=Describing)]
'''


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    return write_basic_spec(tmp_path, mixer="original", tasks=3, run_name="cli")


def test_version(cli) -> None:
    result = cli("--version")
    assert result.code == 0
    assert result.out.strip() == f"beyondagent {__version__}" == "beyondagent 0.1.0"


def test_version_loads_no_plugin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    from beyondagent_core import cli as cli_module
    from beyondagent_core.plugins import PluginManager

    def refuse(self: PluginManager) -> PluginManager:
        raise AssertionError("--version loaded the plugins")

    monkeypatch.setattr(PluginManager, "load", refuse)
    with pytest.raises(SystemExit) as exited:
        cli_module.main(["--version"])
    assert exited.value.code == 0 and capsys.readouterr().out.strip() == f"beyondagent {__version__}"


def test_no_command_prints_help(cli) -> None:
    result = cli()
    assert result.code == 0
    for command in ("run", "validate", "plugins"):
        assert command in result.out


def test_plugins_requirements_pins_working_plugins(cli, make_dist) -> None:
    make_dist("beyondagent-plugin-keep", "keep", "bapc_keep", MIXER, version="0.7.1")
    make_dist("beyondagent-plugin-broken", "broken", "bapc_broken", "raise ImportError('no')\n")
    result = cli("plugins", "--requirements")
    assert result.code == 0, result.text
    lines = result.out.splitlines()
    assert "beyondagent-plugin-mixers==0.1.0" in lines
    assert "beyondagent-plugin-keep==0.7.1" in lines
    assert not any(line.startswith(("beyondagent==", "beyondagent-plugin-broken")) for line in lines)
    assert all(line.count("==") == 1 for line in lines)

    disabled = cli("plugins", "--requirements", env={"BEYONDAGENT_DISABLED_PLUGINS": "keep"})
    assert "beyondagent-plugin-keep==0.7.1" not in disabled.out.splitlines()


def test_plugins_json_shape(cli, make_dist) -> None:
    make_dist("beyondagent-plugin-keep", "keep", "bapc_keep", MIXER, version="0.7.1")
    result = cli("plugins", "--json")
    assert result.code == 0, result.text
    listing = json.loads(result.out)
    keys = {"name", "distribution", "version", "status", "error", "hooks", "provides", "conflicts"}
    for item in listing:
        assert keys <= set(item), item
    by_name = {item["name"]: item for item in listing}
    assert by_name["builtin"] == {
        "name": "builtin", "distribution": "beyondagent", "version": "0.1.0",
        "entry_point": "beyondagent_core.builtin", "status": "ok", "error": None,
        "hooks": ["beyondagent_backends", "beyondagent_rewards", "beyondagent_task_sources", "beyondagent_workflows"],
        "provides": {"task_source": ["jsonl", "parquet"], "workflow": ["react"],
                     "backend": ["export"], "reward": ["env"]},
        "conflicts": {},
    }
    assert by_name["mixers"]["provides"] == {"mixer": ["original", "synthetic", "ratio"]}
    assert by_name["synthesis"]["provides"] == {"summarizer": ["hindsight"], "task_filter": ["dedup", "min_confidence"]}
    assert by_name["synthesis"]["distribution"] == "beyondagent-plugin-synthesis"
    assert by_name["gateway"]["provides"] == {"workflow": ["agent"]}
    assert by_name["keep"]["version"] == "0.7.1" and by_name["keep"]["provides"] == {"mixer": ["keep"]}


def test_plugins_json_reports_conflicts_on_both_providers(cli, make_dist) -> None:
    make_dist("beyondagent-plugin-keep", "keep", "bapc_keep", MIXER, version="0.7.1")
    make_dist("beyondagent-plugin-keep2", "keep2", "bapc_keep2", MIXER, version="1.0.0")
    by_name = {item["name"]: item for item in json.loads(cli("plugins", "--json").out)}
    providers = ["beyondagent-plugin-keep 0.7.1 (keep)", "beyondagent-plugin-keep2 1.0.0 (keep2)"]
    assert by_name["keep"]["conflicts"] == {"mixer": {"keep": providers}}
    assert by_name["keep2"]["conflicts"] == {"mixer": {"keep": providers}}
    assert by_name["mixers"]["conflicts"] == {}
    table = cli("plugins", env={"COLUMNS": "200"})
    assert table.code == 0
    assert "conflict: mixer 'keep' is provided by" in table.out and "select one as plugin/keep" in table.out


def test_plugins_listing_honours_the_switches(cli, make_dist) -> None:
    make_dist("beyondagent-plugin-keep", "keep", "bapc_keep", MIXER, version="0.7.1")
    listing = json.loads(cli("plugins", "--json", env={"BEYONDAGENT_DISABLE_PLUGIN_AUTOLOAD": "1",
                                                       "BEYONDAGENT_PLUGINS": "keep"}).out)
    statuses = {item["name"]: item["status"] for item in listing}
    assert statuses["builtin"] == "ok" and statuses["keep"] == "ok" and statuses["mixers"] == "disabled"
    assert next(i for i in listing if i["name"] == "mixers")["error"] == "not listed in BEYONDAGENT_PLUGINS"


def test_validate_prints_ok_and_the_redacted_spec(cli, spec: Path) -> None:
    result = cli("validate", str(spec), "run.name=${oc.env:CLI_TEST_RUN_NAME}",
                 env={"CLI_TEST_RUN_NAME": "very-secret-name"})
    assert result.code == 0, result.text
    first, *rest = result.out.splitlines()
    assert first == f"{spec}: ok"
    printed = yaml.safe_load("\n".join(rest))
    assert printed["run"]["name"] == "***"
    assert printed["mixture"] == {"name": "original", "shuffle": True, "seed": None}
    assert "very-secret-name" not in result.text
    assert not (spec.parent / "runs").exists()


def test_run_and_dry_run(cli, spec: Path, tmp_path: Path) -> None:
    dry = cli("run", str(spec), "--dry-run")
    assert dry.code == 0, dry.text
    assert "after mixing (epoch 0): 3 tasks = 3 original + 0 synthetic" in dry.out
    assert "dry run: nothing was explored or trained" in dry.out
    assert not (tmp_path / "runs").exists()

    run = cli("run", str(spec))
    assert run.code == 0, run.text
    assert "run finished" in run.out and '"tasks": 3' in run.out
    events = [json.loads(line)["event"] for line in (tmp_path / "runs" / "cli" / "events.jsonl").read_text().splitlines()]
    assert events[0] == "run.started" and events[-1] == "run.finished" and "train.step" in events


def test_a_dry_run_shows_what_the_backend_would_run(cli, spec: Path, make_dist, tmp_path: Path) -> None:
    make_dist("beyondagent-plugin-describing", "describing", "bapc_describing", DESCRIBING_BACKEND)
    dry = cli("run", str(spec), "backend.name=describing", "--dry-run")
    assert dry.code == 0, dry.text
    written = tmp_path / "runs" / "cli" / "other_config.yaml"
    assert f"other system's config: trainer.steps=3 (written to {written})" in dry.out.replace("\n", "")
    assert written.read_text() == "trainer: {steps: 3}\n"
    assert dry.out.rstrip().endswith("dry run: nothing was explored or trained")


def test_a_run_failing_at_run_time_exits_1(cli, spec: Path, make_dist) -> None:
    make_dist("beyondagent-plugin-exploding", "exploding", "bapc_exploding", EXPLODING_BACKEND, version="0.0.9")
    result = cli("run", str(spec), "backend.name=exploding")
    assert result.code == 1, result.text
    assert "Traceback" not in result.text
    assert "error: training failed: OSError: GPU melted" in result.err
    assert "where: backend (backend 'exploding' from beyondagent-plugin-exploding 0.0.9 (exploding))" in result.err
    # The traceback the console leaves out is in the run's events.jsonl, as the hint says.
    assert "events.jsonl in the run directory has it too" in result.err
    events = [json.loads(line) for line in (spec.parent / "runs" / "cli" / "events.jsonl").read_text().splitlines()]
    failed = next(e for e in events if e["event"] == "component.failed")
    assert "Traceback" in failed["exception"] and "OSError: GPU melted" in failed["exception"]
    assert events[-1]["event"] == "run.finished" and events[-1]["status"] == "error"
    verbose = cli("run", str(spec), "backend.name=exploding", "-v")
    assert verbose.code == 1 and "Traceback" in verbose.err and "GPU melted" in verbose.err


def test_the_cli_imports_nothing_heavy(tmp_path: Path) -> None:
    code = (
        "import contextlib, io, json, sys\n"
        "from beyondagent_core.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    code = main(['plugins', '--json'])\n"
        "assert code == 0 and json.loads(out.getvalue())\n"
        "heavy = ('torch', 'transformers', 'ray', 'verl')\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in heavy)))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []


def test_mix_and_export_dry_run(cli) -> None:
    result = cli("run", "examples/mix_and_export.yaml", "--dry-run", cwd=ROOT)
    assert result.code == 0, result.text
    assert "12 original + 6 synthetic" in result.out
    assert "original tasks: 12" in result.out

    half = cli("run", "examples/mix_and_export.yaml", "mixture.synthetic_ratio=0.25", "--dry-run", cwd=ROOT)
    assert half.code == 0, half.text
    assert "12 original + 3 synthetic" in half.out


def test_verbose_flag_before_or_after_the_command(cli):
    for args in (("-v", "plugins"), ("plugins", "-v")):
        result = cli(*args)
        assert result.code == 0, result.text
        assert "plugins.registered" in result.err, args
    assert "plugins.registered" not in cli("plugins").err
