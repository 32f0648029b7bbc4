"""PluginManager on its own: switches, real entry points, inline plugins, lifecycle hooks.

Distributions are made with `make_dist` (a real `.dist-info` folder) and put on `sys.path`
in-process, so `importlib.metadata` finds their entry points exactly as after `pip install`.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from beyondagent_core import BackendSpec, MixerSpec, __version__, hookimpl
from beyondagent_core.context import RunInfo
from beyondagent_core.errors import RequirementError, SpecError
from beyondagent_core.plugins import PluginManager, Switches, check_requirements

SWITCH_VARS = ("BEYONDAGENT_DISABLE_PLUGIN_AUTOLOAD", "BEYONDAGENT_PLUGINS", "BEYONDAGENT_DISABLED_PLUGINS")

ALPHA = '''
from beyondagent_core import MixerSpec, hookimpl

CALLS = []

class Alpha:
    def __init__(self, config):
        pass
    def mix(self, original, synthetic, *, epoch, seed):
        return list(original)

@hookimpl
def beyondagent_mixers():
    return [MixerSpec(name="alpha_mix", factory=Alpha, summary="alpha")]

@hookimpl
def beyondagent_run_started(run):
    CALLS.append(run.name)
'''

BETA = '''
from beyondagent_core import BackendSpec, hookimpl

@hookimpl
def beyondagent_backends():
    return [BackendSpec(name="beta_backend", factory=dict, summary="beta")]
'''

GAMMA = "raise ImportError('gamma needs libfoo')\n"

# Module names used by the made-up distributions; removed from sys.modules around each test
# so one test's import never leaks into the next.
MODULES = ("bapt_alpha", "bapt_beta", "bapt_gamma", "bapt_alpha_again", "bapt_halfbroken", "bapt_pre")


@pytest.fixture(autouse=True)
def clean(monkeypatch: pytest.MonkeyPatch):
    for var in SWITCH_VARS:
        monkeypatch.delenv(var, raising=False)
    for module in MODULES:
        sys.modules.pop(module, None)
    yield
    for module in MODULES:
        sys.modules.pop(module, None)


@pytest.fixture
def dists(make_dist, site: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Three plugins: alpha (a mixer + a lifecycle hook), beta (a backend), gamma (fails to import)."""
    make_dist("beyondagent-plugin-alpha", "alpha", "bapt_alpha", ALPHA, version="1.2.0")
    make_dist("beyondagent-plugin-beta", "beta", "bapt_beta", BETA, version="0.4.1")
    make_dist("beyondagent-plugin-gamma", "gamma", "bapt_gamma", GAMMA, version="3.0.0")
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    return site


def load() -> PluginManager:
    """A manager built the way the CLI builds one: switches from the environment."""
    return PluginManager().load()


def make_run_info(tmp_path: Path) -> RunInfo:
    return RunInfo(name="r1", run_dir=tmp_path / "runs" / "r1", seed=7, spec={"run": {"name": "r1"}})


# --- switches --------------------------------------------------------------------------------


def test_switches_default_to_loading_everything() -> None:
    switches = Switches.from_environment()
    assert (switches.autoload, switches.allow, switches.deny) == (True, set(), set())
    assert switches.why_not("anything") is None


def test_switches_parse_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BEYONDAGENT_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setenv("BEYONDAGENT_PLUGINS", " a, b ,,")
    monkeypatch.setenv("BEYONDAGENT_DISABLED_PLUGINS", "x")
    switches = Switches.from_environment(extra_disabled=["y"])
    assert switches.autoload is False
    assert switches.allow == {"a", "b"}
    assert switches.deny == {"x", "y"}
    assert switches.why_not("a") is None
    assert "BEYONDAGENT_DISABLED_PLUGINS" in switches.why_not("x")
    assert "plugins.disable" in switches.why_not("y")
    assert switches.why_not("c") == "not listed in BEYONDAGENT_PLUGINS"


@pytest.mark.parametrize(("value", "autoload"), [
    ("1", False), ("true", False), ("YES", False), (" on ", False), ("0", True), ("", True), ("no", True),
])
def test_autoload_switch_values(monkeypatch: pytest.MonkeyPatch, value: str, autoload: bool) -> None:
    monkeypatch.setenv("BEYONDAGENT_DISABLE_PLUGIN_AUTOLOAD", value)
    switches = Switches.from_environment()
    assert switches.autoload is autoload
    assert (switches.why_not("p") is None) is autoload


def test_deny_wins_over_allow() -> None:
    switches = Switches(autoload=False, allow={"a"}, deny={"a"})
    assert "disabled" in switches.why_not("a")


# --- real entry points -----------------------------------------------------------------------


def test_entry_points_load_with_their_identity(dists: Path) -> None:
    manager = load()
    alpha, beta, gamma = (manager.records[name] for name in ("alpha", "beta", "gamma"))

    assert alpha.status == "ok" and alpha.error is None
    assert (alpha.distribution, alpha.version, alpha.value) == ("beyondagent-plugin-alpha", "1.2.0", "bapt_alpha")
    assert alpha.provider == "beyondagent-plugin-alpha 1.2.0 (alpha)"
    assert alpha.hooks == ["beyondagent_mixers", "beyondagent_run_started"]
    assert alpha.provides == {"mixer": ["alpha_mix"]}
    assert beta.status == "ok" and beta.provides == {"backend": ["beta_backend"]}

    assert gamma.status == "error"
    assert gamma.error == "import of 'bapt_gamma' failed: ImportError: gamma needs libfoo"
    assert "Traceback" in gamma.traceback and "gamma needs libfoo" in gamma.traceback
    assert gamma.components == [] and manager.broken() == [gamma]

    provided = {(spec.name, record.name) for spec, record in manager.components()}
    assert {("alpha_mix", "alpha"), ("beta_backend", "beta"), ("jsonl", "builtin"), ("export", "builtin")} <= provided
    assert not any(record.name == "gamma" for _, record in manager.components())


def test_disabled_plugins_are_never_imported(dists: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BEYONDAGENT_DISABLED_PLUGINS", "alpha,gamma")
    manager = load()
    for name in ("alpha", "gamma"):
        record = manager.records[name]
        assert record.status == "disabled"
        assert "BEYONDAGENT_DISABLED_PLUGINS" in record.error
        assert record.distribution == f"beyondagent-plugin-{name}"
    assert "bapt_alpha" not in sys.modules and "bapt_gamma" not in sys.modules
    assert manager.records["beta"].status == "ok"
    assert manager.broken() == []
    assert {r.name for r in manager.disabled()} == {"alpha", "gamma"}
    assert "alpha_mix" not in {spec.name for spec, _ in manager.components()}


def test_allow_list_loads_only_the_named_plugins(dists: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BEYONDAGENT_PLUGINS", "beta")
    manager = load()
    assert manager.records["beta"].status == "ok"
    for name in ("alpha", "gamma", "mixers"):
        assert manager.records[name].status == "disabled"
        assert manager.records[name].error == "not listed in BEYONDAGENT_PLUGINS"
    assert manager.records["builtin"].status == "ok"


def test_autoload_off_loads_only_allowed_plugins(dists: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BEYONDAGENT_DISABLE_PLUGIN_AUTOLOAD", "1")
    manager = load()
    statuses = {name: record.status for name, record in manager.records.items()}
    assert statuses["builtin"] == "ok"
    assert all(status == "disabled" for name, status in statuses.items() if name != "builtin")
    assert manager.records["alpha"].error == "BEYONDAGENT_DISABLE_PLUGIN_AUTOLOAD is set"
    assert "bapt_alpha" not in sys.modules

    monkeypatch.setenv("BEYONDAGENT_PLUGINS", "alpha")
    manager = load()
    assert manager.records["alpha"].status == "ok"
    assert manager.records["beta"].status == "disabled"
    assert manager.records["gamma"].status == "disabled"


def test_builtin_is_always_there(dists: Path) -> None:
    for switches in (Switches(), Switches(autoload=False), Switches(deny={"builtin"})):
        record = PluginManager(switches).load().records["builtin"]
        assert record.status == "ok"
        assert record.provider == f"beyondagent {__version__} (builtin)" == "beyondagent 0.1.0 (builtin)"
        assert record.provides == {
            "task_source": ["jsonl", "parquet"], "workflow": ["react"], "backend": ["export"],
            "reward": ["env"],
        }


def test_the_same_entry_point_from_two_distributions_keeps_the_first(make_dist, site: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    make_dist("beyondagent-plugin-alpha", "alpha", "bapt_alpha", ALPHA, version="1.2.0")
    make_dist("beyondagent-plugin-alpha-fork", "alpha", "bapt_alpha_again", BETA, version="9.9.9")
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    with capture_logs() as logs:
        manager = PluginManager(Switches(autoload=False, allow={"alpha"})).load()
    duplicate = [e for e in logs if e["event"] == "plugins.duplicate_entry_point"]
    assert len(duplicate) == 1 and duplicate[0]["name"] == "alpha"
    kept = manager.records["alpha"]
    assert duplicate[0]["kept"] == kept.provider
    assert {duplicate[0]["kept"], duplicate[0]["ignored"]} == {
        "beyondagent-plugin-alpha 1.2.0 (alpha)", "beyondagent-plugin-alpha-fork 9.9.9 (alpha)"}
    assert [r for r in manager.records.values() if r.name == "alpha"] == [kept]


def test_a_plugin_failing_registration_has_its_other_hooks_removed(make_dist, site: Path,
                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    make_dist("beyondagent-plugin-halfbroken", "halfbroken", "bapt_halfbroken", '''
        from beyondagent_core import hookimpl
        CALLS = []
        @hookimpl
        def beyondagent_mixers():
            raise RuntimeError("registration exploded")
        @hookimpl
        def beyondagent_run_started(run):
            CALLS.append(run)
    ''')
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    manager = PluginManager(Switches(autoload=False, allow={"halfbroken"})).load()
    record = manager.records["halfbroken"]
    assert record.status == "error"
    assert record.error == "hook beyondagent_mixers raised RuntimeError: registration exploded"
    manager.notify("beyondagent_run_started", run=make_run_info(tmp_path))
    assert sys.modules["bapt_halfbroken"].CALLS == []


def test_load_is_idempotent(dists: Path, tmp_path: Path) -> None:
    manager = PluginManager()
    assert manager.load() is manager
    records = dict(manager.records)
    components = list(manager.components())
    assert manager.load() is manager
    assert manager.records == records
    assert list(manager.components()) == components
    # One registration per plugin: the lifecycle hook fires once, not once per load().
    manager.notify("beyondagent_run_started", run=make_run_info(tmp_path))
    assert sys.modules["bapt_alpha"].CALLS == ["r1"]


# --- inline plugins --------------------------------------------------------------------------


class Passthrough:
    def __init__(self, config):
        pass

    def mix(self, original, synthetic, *, epoch, seed):
        return list(original) + list(synthetic)


class InlineMixers:
    """An object (not a module) with hookimpls, the way tests register plugins."""

    def __init__(self, *names: str) -> None:
        self.names = names
        self.started: list[RunInfo] = []

    @hookimpl
    def beyondagent_mixers(self):
        return [MixerSpec(name=name, factory=Passthrough, summary=f"mixer {name}") for name in self.names]

    @hookimpl
    def beyondagent_run_started(self, run):
        self.started.append(run)


def test_register_an_inline_object(tmp_path: Path) -> None:
    manager = PluginManager(Switches(autoload=False)).load()
    plugin = InlineMixers("one", "two")
    record = manager.register(plugin, "inline", distribution="inline-dist", version="0.0.1")

    assert record is manager.records["inline"]
    assert record.status == "ok" and record.error is None
    assert record.value == "InlineMixers"
    assert record.hooks == ["beyondagent_mixers", "beyondagent_run_started"]
    assert record.provides == {"mixer": ["one", "two"]}
    assert record.to_json()["provides"] == {"mixer": ["one", "two"]}
    mixers = [(spec.name, rec.provider) for spec, rec in manager.components() if spec.kind == "mixer"]
    assert mixers == [("one", "inline-dist 0.0.1 (inline)"), ("two", "inline-dist 0.0.1 (inline)")]


def test_a_single_record_is_refused_and_none_is_accepted() -> None:
    class Single:
        @hookimpl
        def beyondagent_backends(self):
            return BackendSpec(name="solo", factory=dict)

    class Nothing:
        @hookimpl
        def beyondagent_mixers(self):
            return None

    manager = PluginManager(Switches(autoload=False)).load()
    single = manager.register(Single(), "single")
    assert single.status == "error" and single.provides == {}
    assert single.error == ("hook beyondagent_backends returned a single BackendSpec, expected a list of BackendSpec "
                            "records (return [BackendSpec(...)])")
    nothing = manager.register(Nothing(), "nothing")
    assert nothing.status == "ok" and nothing.provides == {}


def test_a_second_registration_under_the_same_name_is_an_error(tmp_path: Path) -> None:
    manager = PluginManager(Switches(autoload=False)).load()
    first = manager.register(InlineMixers("one"), "inline", distribution="first-dist", version="1.0")
    second_plugin = InlineMixers("two")
    second = manager.register(second_plugin, "inline", distribution="second-dist", version="2.0")

    assert first.status == "ok" and manager.records["inline"] is first
    assert second.status == "error"
    assert second.error == "a plugin named 'inline' is already registered (first-dist 1.0 (inline))"
    assert second in manager.broken()
    assert "two" not in {spec.name for spec, _ in manager.components()}
    # The rejected plugin was never handed to pluggy: its lifecycle hooks do not fire.
    manager.notify("beyondagent_run_started", run=make_run_info(tmp_path))
    assert second_plugin.started == []

    builtin_again = manager.register(InlineMixers("three"), "builtin")
    assert builtin_again.status == "error" and "beyondagent 0.1.0 (builtin)" in builtin_again.error


def test_an_inline_plugin_may_take_the_name_of_a_disabled_entry_point(dists: Path) -> None:
    manager = PluginManager(Switches(deny={"alpha"})).load()
    assert manager.records["alpha"].status == "disabled"
    record = manager.register(InlineMixers("replacement"), "alpha", distribution="local", version="0")
    assert record.status == "ok" and manager.records["alpha"] is record
    assert ("replacement", "alpha") in {(spec.name, rec.name) for spec, rec in manager.components()}


def test_inline_plugin_with_a_bad_hook_signature() -> None:
    class BadSignature:
        @hookimpl
        def beyondagent_run_finished(self, run, status, metrics, surprise):
            pass

    manager = PluginManager(Switches(autoload=False)).load()
    record = manager.register(BadSignature(), "bad")
    assert record.status == "error"
    assert record.error.startswith("registration failed: PluginValidationError")
    # The one-line reason says what is wrong, not only which hook.
    assert "{'surprise'} are declared in the hookimpl but can not be found in the hookspec" in record.error
    assert "\n" not in record.error


# --- lifecycle hooks -------------------------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    @hookimpl
    def beyondagent_run_started(self, run):
        self.calls.append(("started", run))

    @hookimpl
    def beyondagent_step_finished(self, step, metrics):  # a subset of the spec's arguments
        self.calls.append(("step", step, metrics))

    @hookimpl
    def beyondagent_run_finished(self, run, status, metrics):
        self.calls.append(("finished", run.name, status, metrics))


class Raiser:
    @hookimpl
    def beyondagent_run_started(self, run):
        raise RuntimeError("notifier is down\nsecond line")

    @hookimpl
    def beyondagent_run_finished(self, run, status, metrics):
        raise KeyError("missing")


def test_lifecycle_hooks_reach_implementations_and_failures_are_logged(tmp_path: Path) -> None:
    manager = PluginManager(Switches(autoload=False)).load()
    recorder, raiser = Recorder(), Raiser()
    manager.register(raiser, "raiser")
    manager.register(recorder, "recorder")
    info = make_run_info(tmp_path)

    with capture_logs() as logs:
        manager.notify("beyondagent_run_started", run=info)
        manager.notify("beyondagent_step_finished", run=info, step=3, metrics={"loss": 0.5})
        manager.notify("beyondagent_run_finished", run=info, status="ok", metrics={"reward": 1.0})

    assert recorder.calls == [
        ("started", info),
        ("step", 3, {"loss": 0.5}),
        ("finished", "r1", "ok", {"reward": 1.0}),
    ]
    failures = [e for e in logs if e["event"] == "plugins.lifecycle_hook_failed"]
    assert [(e["plugin"], e["hook"], e["error"], e["log_level"]) for e in failures] == [
        ("raiser", "beyondagent_run_started", "RuntimeError: notifier is down", "error"),
        ("raiser", "beyondagent_run_finished", "KeyError: 'missing'", "error"),
    ]


def test_notify_rejects_a_registration_hook() -> None:
    manager = PluginManager(Switches(autoload=False)).load()
    with pytest.raises(AssertionError):
        manager.notify("beyondagent_mixers")


# --- plugins.require -------------------------------------------------------------------------


def test_requirements_satisfied(dists: Path) -> None:
    check_requirements([
        "beyondagent-plugin-mixers>=0.1",
        "beyondagent==0.1.0",
        "beyondagent-plugin-alpha~=1.2",  # a made-up distribution, seen in-process
        "BeyondAgent_Plugin_Beta>=0.4,<1",  # names are normalized
    ], where="spec.yaml, key plugins.require")


def test_requirement_version_mismatch(dists: Path) -> None:
    with pytest.raises(RequirementError) as info:
        check_requirements(["beyondagent-plugin-alpha>=2"], where="spec.yaml, key plugins.require")
    error = info.value
    assert error.message == "required 'beyondagent-plugin-alpha>=2' but beyondagent-plugin-alpha 1.2.0 is installed"
    assert error.where == "spec.yaml, key plugins.require"
    assert error.hint == "pip install 'beyondagent-plugin-alpha>=2'"
    assert error.exit_code == 2


def test_requirement_prerelease_counts_as_installed(make_dist, site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_dist("beyondagent-plugin-pre", "pre", "bapt_pre", "", version="2.0.0rc1")
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    check_requirements(["beyondagent-plugin-pre>=1.0"], where="w")
    with pytest.raises(RequirementError, match="beyondagent-plugin-pre 2.0.0rc1 is installed"):
        check_requirements(["beyondagent-plugin-pre>=2.0"], where="w")


def test_requirement_not_installed() -> None:
    with pytest.raises(RequirementError) as info:
        check_requirements(["beyondagent-plugin-mixers", "beyondagent-plugin-nothere>=1"], where="w")
    assert info.value.message == ("required distribution 'beyondagent-plugin-nothere' is not installed "
                                  "('beyondagent-plugin-nothere>=1')")
    assert info.value.hint == "pip install 'beyondagent-plugin-nothere>=1'"


def test_requirement_with_a_marker_that_does_not_match_is_skipped() -> None:
    check_requirements(['beyondagent-plugin-nothere>=1; python_version < "3"'], where="w")
    with pytest.raises(RequirementError, match="not installed"):
        check_requirements(['beyondagent-plugin-nothere>=1; python_version >= "3"'], where="w")


@pytest.mark.parametrize("text", ["not a requirement!!", "beyondagent-plugin-mixers>>0.1", ""])
def test_invalid_requirement_is_a_spec_error(text: str) -> None:
    with pytest.raises(SpecError) as info:
        check_requirements([text], where="spec.yaml, key plugins.require")
    assert info.value.message.startswith(f"plugins.require entry {text!r} is not a valid requirement")
    assert info.value.where == "spec.yaml, key plugins.require"
    assert "beyondagent-plugin-mixers>=0.1" in info.value.hint
