"""docs/writing-a-plugin.md works as written.

The walk-through's files are taken from its code blocks (each Python block starts with a
`# path` comment; the TOML block is `pyproject.toml`; the YAML block is the spec), written to
a temporary folder (with the task file its `jsonl title=...` block shows) and installed with real pip (offline: `--no-deps --no-build-isolation`,
with `dependencies` emptied because the core is already importable here). Then the real CLI
lists the plugin, a dry run selects its mixer, a typo gets the promised message, and the
plugin's own tests (which use the core's pytest kit) pass.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import docs_kit
import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "writing-a-plugin.md"


def walkthrough_files() -> dict[str, str]:
    return docs_kit.walkthrough_files(DOC)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    package, site = tmp_path_factory.mktemp("easyfirst"), tmp_path_factory.mktemp("site")
    docs_kit.install(DOC, package, site)
    return package, site


run = docs_kit.run


def test_the_walkthrough_has_every_file() -> None:
    assert set(walkthrough_files()) == {
        "pyproject.toml", "spec.yaml", "beyondagent_plugin_easyfirst/__init__.py",
        "beyondagent_plugin_easyfirst/mixer.py", "tests/conftest.py", "tests/test_easyfirst.py",
        "data/train.jsonl",  # the spec reads it: the page creates it
    }


def test_plugin_is_listed_and_selectable(installed: tuple[Path, Path]) -> None:
    package, site = installed
    listing = json.loads(run(["-m", "beyondagent_core.cli", "plugins", "--json"], site, package).stdout)
    plugin = next(p for p in listing if p["name"] == "easyfirst")
    assert plugin["status"] == "ok" and plugin["provides"] == {"mixer": ["easy_first"]}
    assert plugin["distribution"] == "beyondagent-plugin-easyfirst"

    dry = run(["-m", "beyondagent_core.cli", "run", "spec.yaml", "--dry-run"], site, package)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "easy_first" in dry.stdout and "beyondagent-plugin-easyfirst 0.1.0" in dry.stdout
    assert "original tasks: 2" in dry.stdout  # the page's data/train.jsonl, read by the `jsonl` source

    typo = run(["-m", "beyondagent_core.cli", "run", "spec.yaml", "mixture.difficulty_kye=level"], site, package)
    assert typo.returncode == 2
    assert "unknown key mixture.difficulty_kye; did you mean mixture.difficulty_key?" in typo.stderr


def test_the_plugins_own_tests_pass(installed: tuple[Path, Path]) -> None:
    package, site = installed
    result = run(["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], site, package)
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"\b6 passed\b", result.stdout), result.stdout
