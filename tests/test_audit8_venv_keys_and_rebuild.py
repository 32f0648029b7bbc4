"""A venv's cache key holds every part of its recipe, and `venv build --rebuild` rebuilds (eighth audit).

- Two recipes that differ only in their `after` commands, `uninstall` list, `check`, pip `steps`
  or interpreter build different venvs, so they never share one directory; the same recipe
  written another way (lists for tuples) shares it.
- `beyondagent venv build NAME` reuses a ready venv; with `--rebuild` it builds it again. The
  recipe's interpreter here is `false`, so the rebuild stops at its first step at once, saying
  which step: that it was tried is what is checked (no pip, no network).

The CLI's `main` in-process; the venv's plugin comes from an entry point made here.
"""

from __future__ import annotations

import json
import shutil
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import pytest

from beyondagent_core import cli, plugins
from beyondagent_core.venvs import MARKER, VenvRecipe, locate

FALSE = shutil.which("false")
BASE = {"name": "audit8", "steps": [["six==1.16.0"]], "local": ()}

VENV_PLUGIN = '''
from beyondagent_core import VenvSpec, hookimpl
from beyondagent_core.venvs import VenvRecipe


def recipe():
    return VenvRecipe(name="audit8-fake", steps=[], local=(), python={false!r})


@hookimpl
def beyondagent_venvs():
    return [VenvSpec(name="audit8-fake", factory=recipe, summary="a venv whose interpreter always fails")]
'''


@pytest.fixture(autouse=True)
def venv_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "venvs"
    monkeypatch.setenv("BEYONDAGENT_VENVS", str(root))
    return root


def test_every_part_of_a_recipe_is_in_its_key() -> None:
    base = VenvRecipe(**BASE)
    variants = {
        "after": VenvRecipe(**BASE, after=[["python", "-c", "print(1)"]]),
        "uninstall": VenvRecipe(**BASE, uninstall=["six"]),
        "check": VenvRecipe(**BASE, check="import six"),
        "steps": VenvRecipe(**{**BASE, "steps": [["six==1.15.0"]]}),
        "python": VenvRecipe(**BASE, python=FALSE),
    }
    paths = {name: locate(recipe).path for name, recipe in variants.items()}
    assert all(path != locate(base).path for path in paths.values()), paths
    assert len(set(paths.values())) == len(paths)
    assert locate(VenvRecipe(name="audit8", steps=(("six==1.16.0",),), local=[])).path == locate(base).path
    assert locate(VenvRecipe(**BASE, after=[["python", "-c", "print(1)"]])).path == paths["after"]


@pytest.mark.skipif(FALSE is None, reason="needs the `false` command")
def test_venv_build_rebuild_builds_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    (tmp_path / "audit8_venv_plugin.py").write_text(textwrap.dedent(VENV_PLUGIN.format(false=FALSE)))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("BEYONDAGENT_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.delenv("BEYONDAGENT_PLUGINS", raising=False)
    point = metadata.EntryPoint(name="audit8venv", value="audit8_venv_plugin", group=plugins.ENTRY_POINT_GROUP)
    monkeypatch.setattr(plugins, "_entry_points", lambda: [point])
    monkeypatch.setenv("COLUMNS", "1000")  # rich wraps its lines at the console's width
    # a built venv, as a finished build leaves it: its python and the marker written last
    venv = locate(VenvRecipe(name="audit8-fake", steps=[], local=(), python=FALSE))
    (venv.path / "bin").mkdir(parents=True)
    (venv.path / "bin" / "python").symlink_to(sys.executable)
    (venv.path / MARKER).write_text(json.dumps({"seconds": 42.5, "steps": [], "check": ""}))
    assert venv.ready

    assert cli.main(["venv", "build", "audit8-fake"]) == 0
    err = capsys.readouterr().err
    assert f"venv audit8-fake: ready at {venv.path} (built in 42.5 s)" in err

    assert cli.main(["venv", "build", "audit8-fake", "--rebuild"]) == 1
    err = capsys.readouterr().err
    assert "building the 'audit8-fake' venv failed at `python -m venv" in err
    assert not venv.ready  # started over: the old venv is gone
