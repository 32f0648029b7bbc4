"""Cached plugin venvs (`beyondagent_core.venvs`): real venvs built with pip, in a temp root.

The recipes here install `six` (a small wheel) so a build takes seconds; the verl and AppWorld
plugins use the same mechanism for their real stacks.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from beyondagent_core.venvs import (
    MARKER,
    VenvBuildError,
    VenvRecipe,
    ensure_venv,
    locate,
    venv_root,
)
from beyondagent_core.venvs import _build_requirements as build_requirements
from beyondagent_core.venvs import _local_source as local_source
from beyondagent_core.venvs import _source_args as source_args

ROOT = Path(__file__).resolve().parents[1]
SIX = VenvRecipe(name="six-test", steps=[["six==1.16.0"]], local=(),
                 check="import six, sys; print('six', six.__version__, 'prefix', sys.prefix)")


@pytest.fixture(autouse=True)
def venv_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "venvs"
    monkeypatch.setenv("BEYONDAGENT_VENVS", str(root))
    return root


def test_a_venv_is_built_once_then_reused(venv_cache: Path) -> None:
    steps: list[str] = []
    venv = ensure_venv(SIX, progress=steps.append)
    assert venv.ready and venv.path.parent == venv_cache == venv_root()
    assert steps[0].startswith("python -m venv") and "pip install six==1.16.0" in steps and steps[-1] == "check"
    info = venv.info()
    assert info["check"] == f"six 1.16.0 prefix {venv.path}"
    assert [s["step"] for s in info["steps"]][1] == "pip install six==1.16.0" and info["seconds"] > 0
    # the venv's own python sees six; ours does not leak PYTHONPATH into it
    result = venv.run(["-c", "import six, os; print(six.__file__); print(os.environ.get('PYTHONPATH'))"],
                      env=venv.environ())
    assert result.returncode == 0 and str(venv.path) in result.stdout.splitlines()[0]
    assert result.stdout.splitlines()[1] == "None"
    # installed without byte-code; a module's first import compiles it and keeps it, even where this
    # process's environment says not to (PYTHONDONTWRITEBYTECODE: then every run compiled it again)
    assert "install --no-compile six==1.16.0" in venv.log_path.read_text()
    six_cache = Path(result.stdout.splitlines()[0]).parent / "__pycache__"
    shutil.rmtree(six_cache)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PYTHONDONTWRITEBYTECODE", "1")
        assert "PYTHONDONTWRITEBYTECODE" not in venv.environ()
        assert venv.run(["-c", "import six"]).returncode == 0
    assert list(six_cache.glob("six.*.pyc"))
    marker = (venv.path / MARKER).stat().st_mtime_ns
    again: list[str] = []
    assert ensure_venv(SIX, progress=again.append).path == venv.path
    assert again == [] and (venv.path / MARKER).stat().st_mtime_ns == marker  # reused, not rebuilt


def test_the_key_follows_the_recipe() -> None:
    other = VenvRecipe(name="six-test", steps=[["six==1.15.0"]], local=())
    assert locate(SIX).path != locate(other).path
    assert locate(SIX).path == locate(VenvRecipe(name="six-test", steps=[("six==1.16.0",)], local=[],
                                                 check=SIX.check)).path
    assert locate(SIX).path.name.startswith("six-test-")


def test_an_interrupted_build_is_built_again(venv_cache: Path) -> None:
    venv = ensure_venv(SIX)
    (venv.path / MARKER).unlink()  # as if killed before the marker was written
    assert not locate(SIX).ready
    steps: list[str] = []
    assert ensure_venv(SIX, progress=steps.append).ready and steps


def test_a_failed_step_says_which_and_what_to_do() -> None:
    broken = VenvRecipe(name="broken", steps=[["six==1.16.0"], ["no-such-package-beyondagent==9.9"]], local=())
    with pytest.raises(VenvBuildError) as caught:
        ensure_venv(broken)
    message = str(caught.value)
    assert "building the 'broken' venv failed at `pip install no-such-package-beyondagent==9.9`" in message
    assert "No matching distribution" in message and "is ignored" not in message
    assert "hint: pip could not get a package from the index" in message and "build.log" in message
    assert not locate(broken).ready
    assert "no-such-package-beyondagent" in locate(broken).log_path.read_text()


def test_a_failing_check_fails_the_build() -> None:
    recipe = VenvRecipe(name="check-fails", steps=[["six==1.16.0"]], local=(), check="import verl_is_not_here")
    with pytest.raises(VenvBuildError, match="failed at `check`"):
        ensure_venv(recipe)
    assert not locate(recipe).ready


def test_two_processes_build_it_once(venv_cache: Path) -> None:
    script = textwrap.dedent(f"""
        from beyondagent_core.venvs import VenvRecipe, ensure_venv
        recipe = VenvRecipe(name="six-test", steps=[["six==1.16.0"]], local=(), check={SIX.check!r})
        print(ensure_venv(recipe).path)
    """)
    env = {**os.environ, "BEYONDAGENT_VENVS": str(venv_cache)}
    procs = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env)
             for _ in range(2)]
    paths = {proc.communicate(timeout=300)[0].strip() for proc in procs}
    assert all(proc.returncode == 0 for proc in procs) and len(paths) == 1
    log = (Path(paths.pop()) / "build.log").read_text()
    assert log.count("-m venv") == 1


def test_local_distributions_install_the_way_they_are_installed_here() -> None:
    # The checkout is installed editable into the test venv (scripts/_env.sh): so it is in a plugin venv.
    assert source_args(local_source("beyondagent")) == ["-e", str(ROOT)]
    source = SIX.fingerprint()
    assert source["local"] == [] and source["python"].count(".") == 2
    with_core = VenvRecipe(name="core", steps=[], local=["beyondagent"]).fingerprint()["local"][0]
    assert with_core["editable"] is True and with_core["path"] == str(ROOT) and len(with_core["pyproject"]) == 12
    with pytest.raises(VenvBuildError, match="'no-such-dist' is not installed here"):
        VenvRecipe(name="x", steps=[], local=["no-such-dist"]).key()


def test_local_source_trees_are_built_with_what_their_pyprojects_name(tmp_path: Path) -> None:
    """A venv installs our source trees without pip's isolated build environments (one each, ~13 s):
    what building them needs is installed first, from their own `[build-system]` tables."""
    hatch, plain = tmp_path / "hatch", tmp_path / "plain"
    hatch.mkdir(), plain.mkdir()
    (hatch / "pyproject.toml").write_text('[build-system]\nrequires = ["hatchling>=1.21"]\n')
    (plain / "pyproject.toml").write_text('[project]\nname = "plain"\n')  # PEP 517's default backend
    sources = [{"name": "a", "path": str(hatch), "editable": True},
               {"name": "b", "path": str(hatch), "editable": False},
               {"name": "c", "path": str(plain), "editable": False},
               {"name": "d", "path": str(tmp_path / "d-1.0-py3-none-any.whl"), "editable": False},  # nothing to build
               {"name": "six", "version": "1.16.0"}]
    assert build_requirements(sources) == ["hatchling>=1.21", "editables", "setuptools>=40.8.0"]
    assert build_requirements(sources[1:]) == ["hatchling>=1.21", "setuptools>=40.8.0"]  # editables: editable only
    assert build_requirements(sources[3:]) == []
    assert [source_args(source) for source in sources[::2]] == [["-e", str(hatch)], [str(plain)], ["six==1.16.0"]]


VENV_PLUGIN = '''
from beyondagent_core import CommandSpec, VenvSpec, hookimpl
from beyondagent_core.venvs import VenvRecipe

def recipe():
    return VenvRecipe(name="six-test", steps=[["six[unused-extra]==1.16.0"]], local=(),
                      check="import six; print('six', six.__version__)")

def add_hello(parser):
    parser.add_argument("--name", default="world")
    def handler(args):
        print(f"hello {args.name}")
        return 3
    return handler

@hookimpl
def beyondagent_venvs():
    return [VenvSpec(name="six-test", factory=recipe, summary="six, for tests")]

@hookimpl
def beyondagent_commands():
    return [CommandSpec(name="hello", factory=add_hello, summary="Say hello.")]
'''

SECOND_HELLO = '''
from beyondagent_core import CommandSpec, hookimpl

def add_hello(parser):
    return lambda args: 0

def add_broken(parser):
    raise RuntimeError("cannot add it")

@hookimpl
def beyondagent_commands():
    return [CommandSpec(name="hello", factory=add_hello), CommandSpec(name="broken", factory=add_broken),
            CommandSpec(name="run", factory=add_hello)]
'''


def test_venv_cli_lists_builds_and_locates(cli, make_dist, venv_cache: Path) -> None:
    make_dist("beyondagent-plugin-sixer", "sixer", "bapc_sixer", VENV_PLUGIN)
    env = {"BEYONDAGENT_VENVS": str(venv_cache), "BEYONDAGENT_PLUGINS": "sixer"}  # not this machine's plugins
    listing = cli("venv", "list", "--json", env=env)
    assert listing.code == 0, listing.text
    (row,) = json.loads(listing.out)
    assert row["name"] == "six-test" and row["ready"] is False and "beyondagent-plugin-sixer 1.0.0" in row["provider"]
    built = cli("venv", "build", "--all", env=env)
    assert built.code == 0, built.text
    assert "venv six-test: built in" in built.err and "pip install six[unused-extra]==1.16.0" in built.err
    assert "check: six 1.16.0" in built.err
    again = cli("venv", "build", "six-test", env=env)
    assert "venv six-test: ready at" in again.err
    path = cli("venv", "path", "six-test", env=env)
    assert Path(path.out.strip()) == Path(row["path"]) and (Path(row["path"]) / MARKER).is_file()
    old = venv_cache / "six-test-0123456789ab"  # the venv of an earlier recipe
    (old / "bin").mkdir(parents=True)
    (venv_cache / "unrelated-0123456789ab").mkdir()
    assert cli("venv", "prune", "--dry-run", env=env).out.strip() == f"would remove {old}" and old.is_dir()
    assert cli("venv", "prune", env=env).out.strip() == f"removing {old}" and not old.exists()
    assert (venv_cache / "unrelated-0123456789ab").is_dir() and Path(row["path"]).is_dir()
    assert cli("venv", "prune", env=env).out.strip() == "nothing to prune"
    unknown = cli("venv", "build", "sixx", env=env)
    assert unknown.code == 2 and "six-test" in unknown.err  # the closest name is suggested
    nothing = cli("venv", "build", env=env)
    assert nothing.code == 2 and "names: six-test" in nothing.err


def test_plugin_commands(cli, make_dist) -> None:
    make_dist("beyondagent-plugin-sixer", "sixer", "bapc_sixer", VENV_PLUGIN)
    hello = cli("hello", "--name", "there")
    assert hello.code == 3 and hello.out.strip() == "hello there"
    assert "Say hello." in cli("--help").out
    make_dist("beyondagent-plugin-second", "second", "bapc_second", SECOND_HELLO)
    env = {"BEYONDAGENT_PLUGINS": "sixer,second"}
    ambiguous = cli("hello", env=env)
    assert ambiguous.code == 2
    assert "command 'hello' is provided by more than one plugin" in ambiguous.err
    assert "beyondagent-plugin-sixer 1.0.0 (sixer)" in ambiguous.err and "beyondagent-plugin-second" in ambiguous.err
    broken = cli("broken", env=env)
    assert broken.code == 2 and "command 'broken' could not be set up: RuntimeError: cannot add it" in broken.err
    assert "beyondagent-plugin-second 1.0.0 (second)" in broken.err
    # a plugin cannot take over a core command
    assert "--dry-run" in cli("run", "--help").out
    listing = json.loads(cli("plugins", "--json", env=env).out)
    second = next(item for item in listing if item["name"] == "second")
    assert second["provides"]["command"] == ["hello", "broken", "run"] and "hello" in second["conflicts"]["command"]


class Echo:
    """An env that needs nothing; registered as living in the `six-test` venv."""

    def __init__(self, config):
        pass


def venv_env_plugin():
    from beyondagent_core import EnvSpec, VenvSpec, hookimpl

    class Plugin:
        @hookimpl
        def beyondagent_envs(self):
            return [EnvSpec(name="echo_in_venv", factory=Echo, venv="six-test", serve_args=("--threads", "2"))]

        @hookimpl
        def beyondagent_venvs(self):
            return [VenvSpec(name="six-test", factory=lambda: SIX)]

    return Plugin()


@pytest.mark.beyondagent_plugins("mixers")
def test_an_env_in_its_own_venv_is_never_run_in_process(plugin_manager, register_plugin, tmp_path: Path) -> None:
    import yaml

    from beyondagent_core import pipeline
    from beyondagent_core.context import RunContext, RunInfo
    from beyondagent_core.errors import SpecError

    register_plugin(venv_env_plugin())
    (tmp_path / "t.jsonl").write_text('{"task_id": "a", "query": "q"}\n')
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({
        "run": {"name": "venv-env", "output_dir": str(tmp_path / "runs")},
        "tasks": {"train": {"name": "jsonl", "path": str(tmp_path / "t.jsonl")}},
        "env": {"name": "echo_in_venv", "service": "local"}, "backend": {"name": "export"}}))
    session = pipeline.prepare(path, [], manager=plugin_manager)
    context = RunContext(spec=session.spec, manager=plugin_manager,
                         info=RunInfo(name="venv-env", run_dir=tmp_path, seed=0, spec={}))
    with pytest.raises(SpecError) as caught:
        context.env_opener()
    assert "env 'echo_in_venv' runs in its own venv ('six-test')" in str(caught.value)
    assert "key env.service (local)" in str(caught.value) and "set env.service: launch" in str(caught.value)


def test_launching_an_env_uses_its_venv_python(register_plugin, registry) -> None:
    from beyondagent_core.context import launch_settings
    from beyondagent_core.registry import Registry

    register_plugin(venv_env_plugin())
    fresh = Registry(registry.manager)
    env = fresh.resolve("env", "echo_in_venv", key_path="env").spec
    settings = launch_settings(fresh, env)
    assert settings == {"args": ("--threads", "2"), "python": str(locate(SIX).python)} and locate(SIX).ready


TWO_VENVS_PLUGIN = '''
from beyondagent_core import VenvSpec, hookimpl
from beyondagent_core.venvs import VenvRecipe

def six_recipe():
    return VenvRecipe(name="six-test", steps=[["six==1.16.0"]], local=(), check="import six; print('six', six.__version__)")

def old_six_recipe():
    return VenvRecipe(name="old-six-test", steps=[["six==1.15.0"]], local=(),
                      check="import six; print('six', six.__version__)")

@hookimpl
def beyondagent_venvs():
    return [VenvSpec(name="six-test", factory=six_recipe), VenvSpec(name="old-six-test", factory=old_six_recipe)]
'''


def test_venv_build_jobs_builds_side_by_side(cli, make_dist, venv_cache: Path) -> None:
    make_dist("beyondagent-plugin-twosix", "twosix", "bapc_twosix", TWO_VENVS_PLUGIN)
    env = {"BEYONDAGENT_VENVS": str(venv_cache), "BEYONDAGENT_PLUGINS": "twosix"}
    built = cli("venv", "build", "--all", "--jobs", "2", env=env)
    assert built.code == 0, built.text
    for name, version in (("six-test", "1.16.0"), ("old-six-test", "1.15.0")):
        assert f"venv {name}: building" in built.err and f"venv {name}: built in" in built.err
        assert f"venv {name}: pip install six=={version}" in built.err  # each build's stages, as plain lines
        assert f"check: six {version}" in built.err
    listing = json.loads(cli("venv", "list", "--json", env=env).out)
    assert sorted((row["name"], row["ready"]) for row in listing) == [("old-six-test", True), ("six-test", True)]
    bad = cli("venv", "build", "--all", "--jobs", "0", env=env)
    assert bad.code == 2 and "argument --jobs: must be an integer in [1, 64], got 0" in bad.err
