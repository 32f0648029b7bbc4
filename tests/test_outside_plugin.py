"""The "done when" check: a plugin written outside this repository works once pip installs it.

This test really runs pip: it writes a third-party plugin package (hatchling build backend,
`[project.entry-points.beyondagent] shuffle = "beyondagent_plugin_shuffle"`) to a temporary
folder and installs it with `python -m pip install --no-deps --no-build-isolation --target
<tmp>/site <pkgdir>`. No network is needed: `--no-build-isolation` builds with the hatchling
already installed here instead of downloading one, and `--no-deps` (plus `dependencies = []`)
resolves nothing. Then the real `beyondagent` CLI runs in a subprocess with that folder on
PYTHONPATH, and must list the plugin and use its mixer by name.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from beyondagent_core.jsonl import read_tasks, write_tasks
from beyondagent_core.types import Task

PYPROJECT = """\
[build-system]
requires = ["hatchling>=1.21"]
build-backend = "hatchling.build"

[project]
name = "beyondagent-plugin-shuffle"
version = "0.2.0"
description = "A mixer that shuffles originals and synthetic tasks together."
requires-python = ">=3.11"
dependencies = []

[project.entry-points.beyondagent]
shuffle = "beyondagent_plugin_shuffle"

[tool.hatch.build.targets.wheel]
packages = ["beyondagent_plugin_shuffle"]
"""

INIT = '''
"""A third-party plugin: one mixer, `shuffle_all`."""

import attrs

from beyondagent_core import MixerSpec, hookimpl


@attrs.define
class ShuffleConfig:
    salt: int = 0


@hookimpl
def beyondagent_mixers():
    return [MixerSpec(name="shuffle_all", factory="beyondagent_plugin_shuffle.mixer:ShuffleAll",
                      config_cls=ShuffleConfig, summary="Originals and synthetic, shuffled.")]
'''

MIXER = '''
import random


class ShuffleAll:
    def __init__(self, config):
        self.salt = config.salt

    def mix(self, original, synthetic, *, epoch, seed):
        tasks = list(original) + list(synthetic)
        random.Random(f"{seed}-{epoch}-{self.salt}").shuffle(tasks)
        return tasks
'''

PROVIDER = "beyondagent-plugin-shuffle 0.2.0 (shuffle)"


@pytest.fixture
def installed(tmp_path: Path, site: Path) -> Path:
    """The plugin, built from source and installed by pip into `site` (on the CLI's PYTHONPATH)."""
    package = tmp_path / "beyondagent-plugin-shuffle"
    module = package / "beyondagent_plugin_shuffle"
    module.mkdir(parents=True)
    (package / "pyproject.toml").write_text(PYPROJECT)
    (module / "__init__.py").write_text(textwrap.dedent(INIT))
    (module / "mixer.py").write_text(textwrap.dedent(MIXER))
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
         "--disable-pip-version-check", "--quiet", "--target", str(site), str(package)],
        capture_output=True, text=True, timeout=180,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    dist_info = site / "beyondagent_plugin_shuffle-0.2.0.dist-info"
    assert "shuffle = beyondagent_plugin_shuffle" in (dist_info / "entry_points.txt").read_text()
    return site


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    train = tmp_path / "train.jsonl"
    write_tasks(train, [Task(task_id=f"t{i}", query=f"q{i}") for i in range(6)])
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({
        "run": {"name": "outside", "output_dir": str(tmp_path / "runs"), "seed": 1},
        "tasks": {"train": {"name": "jsonl", "path": str(train)}},
        "mixture": {"name": "shuffle_all", "salt": 5},
        "backend": {"name": "export"},
        "plugins": {"require": ["beyondagent-plugin-shuffle>=0.2"]},
    }))
    return path


def test_pip_installed_plugin_is_listed(installed: Path, cli) -> None:
    result = cli("plugins", "--json")
    assert result.code == 0, result.text
    listing = {item["name"]: item for item in json.loads(result.out)}
    shuffle = listing["shuffle"]
    assert shuffle["status"] == "ok" and shuffle["error"] is None
    assert shuffle["distribution"] == "beyondagent-plugin-shuffle"
    assert shuffle["version"] == "0.2.0"
    assert shuffle["entry_point"] == "beyondagent_plugin_shuffle"
    assert shuffle["hooks"] == ["beyondagent_mixers"]
    assert shuffle["provides"] == {"mixer": ["shuffle_all"]}
    assert shuffle["conflicts"] == {}

    pins = cli("plugins", "--requirements")
    assert "beyondagent-plugin-shuffle==0.2.0" in pins.out.splitlines()


def test_pip_installed_plugin_is_used_by_name(installed: Path, cli, spec: Path, tmp_path: Path) -> None:
    dry = cli("run", str(spec), "--dry-run", env={"COLUMNS": "200"})
    assert dry.code == 0, dry.text
    assert PROVIDER in dry.out
    mixture_row = next(line for line in dry.out.splitlines() if " mixture " in line)
    assert "shuffle_all" in mixture_row and PROVIDER in mixture_row
    assert "after mixing (epoch 0): 6 tasks = 6 original + 0 synthetic" in dry.out
    assert not (tmp_path / "runs").exists()

    run = cli("run", str(spec))
    assert run.code == 0, run.text
    run_dir = tmp_path / "runs" / "outside"
    provenance = json.loads((run_dir / "plugins.json").read_text())
    assert provenance["components"]["mixture"] == {
        "kind": "mixer", "name": "shuffle_all", "plugin": "shuffle",
        "distribution": "beyondagent-plugin-shuffle", "version": "0.2.0"}
    exported = [t.task_id for t in read_tasks(run_dir / "data" / "train.epoch0.jsonl")]
    assert sorted(exported) == [f"t{i}" for i in range(6)]
    assert exported != sorted(exported)  # really the plugin's mixer: seeded shuffle, not the input order


def test_pip_installed_plugin_can_be_disabled(installed: Path, cli, spec: Path) -> None:
    result = cli("run", str(spec), "--dry-run", env={"BEYONDAGENT_DISABLED_PLUGINS": "shuffle"})
    assert result.code == 2
    assert "unknown mixer 'shuffle_all'" in result.err
    assert "these plugins are disabled: " in result.err and "shuffle" in result.err
