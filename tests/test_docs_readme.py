"""The README's commands and examples table say what the code does (issue 24, part 6).

- Every command of "## Using it" that needs no GPU, endpoint, data or built venv (dry runs,
  `validate`, the plugin listings, `model list`, `venv list`) is taken from the README's own code
  block and run as written with the real CLI, in a copy of `examples/` so nothing is written here.
- The examples table lists every example with what it needs; one marked "CPU, offline" really is:
  the tiny model, no LLM endpoint, no hub id, no data file outside `examples/`, a CPU device.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
# What "## Using it" runs that needs nothing beyond this checkout (no GPU, endpoint, run dir or venv build).
SELF_CONTAINED = (r"run \S+ --dry-run", r"validate ", r"plugins( --json| --requirements)?$", r"model list$",
                  r"venv list$")


def section(title: str) -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index(f"\n## {title}")
    return text[start:text.find("\n## ", start + 1)]


def using_it_commands() -> list[str]:
    block = re.search(r"```bash\n(.*?)```", section("Using it"), re.S).group(1)
    commands = [line.split("#", 1)[0].strip() for line in block.splitlines()]
    return [c for c in commands if c.startswith("beyondagent ")]


def self_contained() -> list[str]:
    return [c for c in using_it_commands()
            if any(re.search(pattern, c.removeprefix("beyondagent ")) for pattern in SELF_CONTAINED)]


def test_the_block_has_the_commands_this_test_runs() -> None:
    chosen = self_contained()
    assert len(chosen) >= 6, chosen  # dry run, validate, three plugin listings, model list, venv list
    assert any("--dry-run" in c for c in chosen) and any(c.startswith("beyondagent validate") for c in chosen)


@pytest.mark.parametrize("command", self_contained())
def test_a_readme_command_runs_as_written(command: str, tmp_path: Path) -> None:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    env = {k: v for k, v in os.environ.items() if not k.startswith("BEYONDAGENT_")}
    env["PYTHONPATH"] = str(ROOT)
    args = shlex.split(command)[1:]
    result = subprocess.run([sys.executable, "-m", "beyondagent_core.cli", *args], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{command}\n{result.stdout}\n{result.stderr}"
    assert result.stdout.strip(), command  # each prints what it promises
    assert not (tmp_path / "runs").exists(), f"{command} wrote a run directory"


def examples_table() -> dict[str, str]:
    rows = {}
    for line in section("A real model").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("| `examples/") and len(cells) == 3:
            rows[cells[0].strip("`")] = cells[2]
    return rows


def test_the_examples_table_lists_every_example_with_what_it_needs() -> None:
    table = examples_table()
    listed = set(table) | {"examples/quickstart.yaml"}  # the quickstart has its own section
    assert listed == {f"examples/{p.name}" for p in (ROOT / "examples").glob("*.yaml")}
    assert all(needs for needs in table.values()), table


@pytest.mark.parametrize("example", [name for name, needs in examples_table().items() if needs == "CPU, offline"])
def test_an_example_marked_cpu_offline_needs_nothing_else(example: str) -> None:
    spec = yaml.safe_load((ROOT / example).read_text(encoding="utf-8"))
    assert (spec.get("model") or {}).get("path", "tiny") == "tiny", f"{example}: not the locally built model"
    llm = spec.get("llm")
    assert llm in (None, "policy"), f"{example}: llm {llm!r} is an endpoint"
    backend = spec["backend"]
    assert backend.get("device", "cpu") == "cpu" or backend["name"] == "export", backend
    paths = [block.get("path") for block in (spec.get("tasks") or {}).values() if isinstance(block, dict)]
    assert all(path is None or (ROOT / path).is_file() and path.startswith("examples/") for path in paths), paths
