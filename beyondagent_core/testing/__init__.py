"""A pytest plugin for plugin authors (opt-in): isolated plugin managers, inline plugins, runs.

Enable it with `pytest -p beyondagent_core.testing` or `pytest_plugins = ["beyondagent_core.testing"]`
in a conftest. Fixtures:

- `plugin_manager`: a fresh, loaded `PluginManager` with entry-point autoload off. Entry points
  named by `@pytest.mark.beyondagent_plugins("mixers", ...)` are loaded; nothing else is.
- `register_plugin(obj, name="inline")`: register a module or object with hookimpls for one test.
- `registry`: a `Registry` over `plugin_manager` (build it after registering inline plugins).
- `run_spec(spec, *overrides, dry_run=False)`: run a spec (a dict or a path) in a temporary
  directory with `plugin_manager`'s plugins; returns a `SpecRun` (run_dir, metrics, plan).
- `openai_server`: a started `ScriptedOpenAIServer` on loopback (an OpenAI-compatible stand-in for
  a hosted LLM, `beyondagent_core.testing.openai_server`); script it with `push(...)`.

Contract suites to subclass live in `beyondagent_core.testing.contracts` (task sources, mixers,
envs, judges), `explorer_contract`, `advantage_contract` and `experience_contract`; a backend that
writes another framework's config checks that every spec key reaches it with `key_reach.KeyReachTable`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import yaml

from beyondagent_core.plugins import PluginManager, PluginRecord, Switches
from beyondagent_core.registry import Registry

MARKER = "beyondagent_plugins"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}(*names): entry points the plugin_manager fixture loads")


@pytest.fixture
def plugin_manager(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> PluginManager:
    for var in ("BEYONDAGENT_PLUGINS", "BEYONDAGENT_DISABLED_PLUGINS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("BEYONDAGENT_DISABLE_PLUGIN_AUTOLOAD", "1")
    allow = {name for marker in request.node.iter_markers(MARKER) for name in marker.args}
    manager = PluginManager(Switches(autoload=False, allow=allow)).load()
    missing = allow - {name for name, record in manager.records.items() if record.status == "ok"}
    if missing:
        problems = [f"{n}: {manager.records[n].error}" if n in manager.records else f"{n}: not installed"
                    for n in sorted(missing)]
        pytest.fail("beyondagent plugins could not be loaded: " + "; ".join(problems))
    return manager


@pytest.fixture
def register_plugin(plugin_manager: PluginManager) -> Callable[..., PluginRecord]:
    def register(plugin: object, name: str = "inline", *, distribution: str = "inline-test-plugin",
                 version: str = "0.0.0") -> PluginRecord:
        return plugin_manager.register(plugin, name, distribution=distribution, version=version)

    return register


@pytest.fixture
def registry(plugin_manager: PluginManager) -> Registry:
    return Registry(plugin_manager)


@attrs.define
class SpecRun:
    """What `run_spec` returns: the run directory, the backend's metrics, or the dry-run plan."""

    run_dir: Path
    metrics: dict[str, Any] | None = None
    plan: Any = None


@pytest.fixture
def run_spec(plugin_manager: PluginManager, tmp_path: Path,
             monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., SpecRun]]:
    from beyondagent_core import pipeline

    monkeypatch.chdir(tmp_path)

    def run(spec: dict[str, Any] | str | Path, *overrides: str, dry_run: bool = False,
            on_bad_record: str = "fail", resume: bool = False) -> SpecRun:
        if isinstance(spec, dict):
            spec = dict(spec)
            spec.setdefault("run", {}).setdefault("output_dir", str(tmp_path / "runs"))
            path = tmp_path / "spec.yaml"
            path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
        else:
            path = Path(spec)
        session = pipeline.prepare(path, list(overrides), manager=plugin_manager)
        run_dir = Path(session.spec.run.output_dir) / session.spec.run.name
        if dry_run:
            return SpecRun(run_dir=run_dir, plan=pipeline.plan(session, on_bad_record=on_bad_record))
        return SpecRun(run_dir=run_dir, metrics=pipeline.run(session, on_bad_record=on_bad_record, resume=resume))

    yield run


@pytest.fixture
def openai_server() -> Iterator[Any]:
    """A local OpenAI-compatible server replaying scripted replies; it stands in for a hosted LLM."""
    from beyondagent_core.testing.openai_server import ScriptedOpenAIServer

    with ScriptedOpenAIServer() as server:
        yield server
