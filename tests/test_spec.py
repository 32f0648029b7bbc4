"""The run spec: overrides, defaults, secrets, and the errors a wrong spec gets.

Components come from the core's built-ins (`jsonl` source, `export` backend) and from inline
plugins registered for the test. The default mixer `ratio` lives in the separate `mixers`
plugin, which the `plugin_manager` fixture does not load, so every spec here selects the
inline mixer `blend` explicitly.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import attrs
import pytest
import yaml

from beyondagent_core.errors import AmbiguousComponentError, SpecError, UnknownComponentError
from beyondagent_core.hookspecs import hookimpl
from beyondagent_core.records import ExplorerSpec, MixerSpec, TaskFilterSpec
from beyondagent_core.registry import Registry
from beyondagent_core.spec import REDACTED, Spec, load_spec_file, parse_spec, validate_spec
from beyondagent_core.types import Task

# --- inline components ---------------------------------------------------------------------


@attrs.define
class RetryConfig:
    attempts: int = 3
    backoff_s: float = 0.5


@attrs.define
class BlendConfig:
    synthetic_ratio: float = 1.0
    api_key: str | None = None
    hub_token: str | None = None
    weights: list[float] = attrs.field(factory=lambda: [1.0, 1.0])
    retry: RetryConfig = attrs.field(factory=RetryConfig)


class Blend:
    def __init__(self, config: BlendConfig):
        self.config = config

    def mix(self, original: list[Task], synthetic: list[Task], *, epoch: int, seed: int) -> list[Task]:
        return list(original) + list(synthetic)


@attrs.define
class MinConfidenceConfig:
    threshold: float = 0.5


class MinConfidence:
    def __init__(self, config: MinConfidenceConfig):
        self.config = config


@attrs.define
class WanderConfig:
    max_steps: int = 10


class Wander:
    def __init__(self, config: WanderConfig):
        self.config = config


class InlinePlugin:
    """A mixer, a task filter and an explorer, like a third-party plugin would register them."""

    @hookimpl
    def beyondagent_mixers(self) -> list[MixerSpec]:
        return [MixerSpec(name="blend", factory=Blend, config_cls=BlendConfig, summary="Everything, in order.")]

    @hookimpl
    def beyondagent_task_filters(self) -> list[TaskFilterSpec]:
        return [TaskFilterSpec(name="confident", factory=MinConfidence, config_cls=MinConfidenceConfig)]

    @hookimpl
    def beyondagent_explorers(self) -> list[ExplorerSpec]:
        return [ExplorerSpec(name="wander", factory=Wander, config_cls=WanderConfig)]


@attrs.define
class AlphaConfig:
    alpha_only: int = 1


@attrs.define
class BetaConfig:
    beta_only: str = "b"


class SharedNamePlugin:
    """Provides a mixer named `shared`, with a config class of its own."""

    def __init__(self, config_cls: type):
        self.config_cls = config_cls

    @hookimpl
    def beyondagent_mixers(self) -> list[MixerSpec]:
        return [MixerSpec(name="shared", factory=lambda config: config, config_cls=self.config_cls)]


@pytest.fixture(autouse=True)
def inline_plugin(register_plugin) -> None:
    record = register_plugin(InlinePlugin(), "inline")
    assert record.status == "ok", record.error


def base_spec() -> dict[str, Any]:
    return {
        "tasks": {"train": {"name": "jsonl", "path": "train.jsonl"}},
        "mixture": {"name": "blend"},
        "backend": {"name": "export"},
    }


def with_(**sections: Any) -> dict[str, Any]:
    spec = base_spec()
    spec.update(copy.deepcopy(sections))
    return spec


def validate(registry: Registry, data: dict[str, Any], *overrides: str) -> Spec:
    return validate_spec(parse_spec(data, list(overrides)), registry)


def spec_error(registry: Registry, data: dict[str, Any], *overrides: str) -> SpecError:
    with pytest.raises(SpecError) as info:
        validate(registry, data, *overrides)
    return info.value


def test_a_bad_env_service_fails_at_validation(registry: Registry) -> None:
    error = spec_error(registry, with_(env={"service": "ftp://envs:8000"}))
    assert "env.service must be local, launch or an http(s):// URL" in error.message
    assert error.where.endswith("key env")
    assert validate(registry, with_(env={"service": "http://127.0.0.1:8000"})).resolved["env"]["service"] \
        == "http://127.0.0.1:8000"


# --- defaults and overrides -------------------------------------------------------------------


def test_defaults_are_filled_into_resolved(registry: Registry) -> None:
    spec = validate(registry, base_spec())
    resolved = spec.resolved
    assert resolved["run"] == {"name": "run", "output_dir": "runs", "seed": 0, "profile": None}
    assert resolved["model"] == {"path": "tiny", "tokenizer": None, "dtype": "auto", "param_dtype": "float32",
                                 "lora": None, "gradient_checkpointing": None}
    assert resolved["algorithm"]["group_size"] == 8
    assert resolved["algorithm"]["clip_ratio"] == 0.2
    assert resolved["algorithm"]["clip_ratio_c"] == 3.0
    assert resolved["algorithm"]["kl_type"] == "low_var_kl"
    assert resolved["algorithm"]["loss_agg_mode"] == "token-mean"
    assert resolved["plugins"] == {"require": [], "disable": [], "settings": {}}
    assert resolved["tasks"] == {"train": {"name": "jsonl", "path": "train.jsonl", "limit": None}, "val": None}
    assert resolved["env"] == {"name": None, "service": "local", "serve_args": [], "call_timeout": None}
    assert resolved["explore"] == {"name": None, "n": 0, "workers": 4, "cache": None, "executor": "local",
                                   "ray_address": None, "ray_actors": 2, "ray_num_cpus": 0.25,
                                   "max_failed_fraction": 0.0, "summarizer": {"name": None}}
    assert resolved["mixture"] == {
        "name": "blend", "synthetic_ratio": 1.0, "api_key": None, "hub_token": None,
        "weights": [1.0, 1.0], "retry": {"attempts": 3, "backoff_s": 0.5},
    }
    assert resolved["backend"] == {"name": "export", "format": "jsonl", "epochs": 1, "dir": "data"}
    assert resolved["workflow"] == {"name": None}
    assert resolved["reward"] == {"name": None}
    # The resolved spec is plain data: it can be saved and loaded as YAML.
    assert yaml.safe_load(yaml.safe_dump(resolved)) == resolved


def test_validated_spec_has_typed_sections_and_configs(registry: Registry) -> None:
    spec = validate(registry, base_spec())
    assert spec.run.seed == 0
    assert spec.algorithm.norm_adv_by_std is True
    mixture = spec.component("mixture")
    assert mixture is not None and mixture.name == "blend"
    assert mixture.registration.plugin.name == "inline"
    assert isinstance(mixture.config, BlendConfig)
    assert isinstance(mixture.config.retry, RetryConfig)
    blend = mixture.create()
    assert isinstance(blend, Blend) and blend.config == BlendConfig()
    assert spec.component("tasks.train").registration.plugin.name == "builtin"
    assert spec.component("tasks.val").registration is None
    assert spec.component("explore").registration is None
    assert spec.explore.n == 0
    assert spec.filters == []


def test_overrides_are_applied(registry: Registry) -> None:
    spec = validate(
        registry, base_spec(),
        "run.seed=7",
        "run.name=nightly",
        "mixture.synthetic_ratio=2.5",
        "mixture.retry.attempts=5",
        "mixture.weights=[0.5, 2]",
        "plugins.disable=[mixers, gym]",
        "tasks.val.name=jsonl",
        "tasks.val.path=val.jsonl",
        "backend.format=parquet",
        "algorithm.norm_adv_by_std=false",
    )
    assert spec.run.seed == 7
    assert spec.run.name == "nightly"
    assert spec.algorithm.norm_adv_by_std is False
    assert spec.plugins.disable == ["mixers", "gym"]
    mixture = spec.component("mixture").config
    assert mixture.synthetic_ratio == 2.5
    assert mixture.retry == RetryConfig(attempts=5, backoff_s=0.5)
    assert mixture.weights == [0.5, 2.0]
    assert spec.component("tasks.val").config.path == "val.jsonl"
    assert spec.component("backend").config.format == "parquet"
    assert spec.resolved["tasks"]["val"] == {"name": "jsonl", "path": "val.jsonl", "limit": None}
    assert spec.resolved["mixture"]["retry"] == {"attempts": 5, "backoff_s": 0.5}


def test_override_replaces_a_list_and_merges_a_mapping(registry: Registry) -> None:
    data = with_(mixture={"name": "blend", "weights": [3.0, 4.0, 5.0], "retry": {"attempts": 9, "backoff_s": 2.0}})
    spec = validate(registry, data, "mixture.weights=[1]", "mixture.retry={attempts: 1}")
    config = spec.component("mixture").config
    assert config.weights == [1.0]
    assert config.retry == RetryConfig(attempts=1, backoff_s=2.0)


def test_override_wins_over_the_file_and_does_not_touch_the_input(registry: Registry) -> None:
    data = with_(run={"seed": 3})
    raw = parse_spec(data, ["run.seed=4"])
    assert raw.data["run"]["seed"] == 4
    assert data["run"]["seed"] == 3


def test_a_profile_is_merged_over_the_spec_and_overrides_win(registry: Registry) -> None:
    data = with_(run={"seed": 3}, model={"path": "tiny", "dtype": "float32"},
                 profiles={"real": {"model": {"path": "smollm2-135m-instruct"}, "run": {"seed": 5},
                                    "mixture": {"retry": {"attempts": 9}}}})
    spec = validate_spec(parse_spec(data, ["run.seed=7"], profile="real"), registry)
    assert spec.model.path == "smollm2-135m-instruct" and spec.model.dtype == "float32"  # merged, not replaced
    assert spec.run.seed == 7 and spec.run.profile == "real"  # the override wins; the profile is recorded
    assert spec.component("mixture").config.retry == RetryConfig(attempts=9, backoff_s=0.5)
    assert "profiles" not in spec.resolved
    assert "profiles" in data  # the input is not touched


def test_without_a_profile_the_profiles_section_is_ignored(registry: Registry) -> None:
    spec = validate(registry, with_(profiles={"real": {"model": {"path": "elsewhere"}}}))
    assert spec.model.path == "tiny" and spec.run.profile is None and "profiles" not in spec.resolved


def test_an_unknown_profile_names_the_defined_ones() -> None:
    with pytest.raises(SpecError) as info:
        parse_spec(with_(profiles={"real": {}, "gpu": {}}), profile="smollm")
    assert info.value.message == "profile 'smollm' is not defined; this spec defines gpu, real"
    assert info.value.where.endswith("key profiles")
    with pytest.raises(SpecError) as info:
        parse_spec(base_spec(), profile="real")
    assert "this spec has no `profiles:` section" in info.value.message
    with pytest.raises(SpecError) as info:
        parse_spec(with_(profiles={"real": [1, 2]}), profile="real")
    assert "must be a mapping of sections" in info.value.message and info.value.where.endswith("profiles.real")


def test_every_example_profile_validates(registry: Registry) -> None:
    """The examples' profiles (the real-model settings) select keys that exist: checked by the
    examples' own tests with every plugin loaded; here, that each one at least merges."""
    examples = Path(__file__).resolve().parents[1] / "examples"
    found = 0
    for path in sorted(examples.glob("*.yaml")):
        profiles = (yaml.safe_load(path.read_text()) or {}).get("profiles") or {}
        for name in profiles:
            raw = load_spec_file(path, profile=name)
            assert raw.data["run"]["profile"] == name and "profiles" not in raw.data
            found += 1
    assert found >= 1


def test_override_with_null_and_empty_value(registry: Registry) -> None:
    spec = validate(registry, with_(model={"tokenizer": "tok"}), "model.tokenizer=null", "run.output_dir=")
    assert spec.model.tokenizer is None
    assert spec.run.output_dir == ""


@pytest.mark.parametrize("override", ["run.seed", "=3", " =3"])
def test_override_without_key_and_value_is_rejected(override: str) -> None:
    with pytest.raises(SpecError, match="is not KEY=VALUE"):
        parse_spec(base_spec(), [override])


def test_override_with_bad_yaml_is_rejected() -> None:
    with pytest.raises(SpecError, match="cannot apply override 'mixture.weights=\\[1, 2'"):
        parse_spec(base_spec(), ["mixture.weights=[1, 2"])


def test_override_of_a_wrong_type_names_the_key(registry: Registry) -> None:
    error = spec_error(registry, base_spec(), "run.seed=soon")
    assert error.message == "run.seed must be an integer, got 'soon' (str)"


# --- secrets ---------------------------------------------------------------------------------


def test_env_values_are_resolved_and_redacted(registry: Registry, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BA_TEST_API_KEY", "sk-live-0123456789")
    monkeypatch.setenv("BA_TEST_RUN_NAME", "nightly-run")
    monkeypatch.setenv("BA_TEST_DISABLED", "private-plugin")
    data = with_(
        run={"name": "${oc.env:BA_TEST_RUN_NAME}"},
        mixture={"name": "blend", "api_key": "${oc.env:BA_TEST_API_KEY}"},
        plugins={"disable": ["${oc.env:BA_TEST_DISABLED}"]},
    )
    spec = validate(registry, data)
    assert spec.run.name == "nightly-run"
    assert spec.component("mixture").config.api_key == "sk-live-0123456789"
    assert spec.plugins.disable == ["private-plugin"]
    assert spec.resolved["mixture"]["api_key"] == "sk-live-0123456789"

    text = spec.redacted_yaml()
    for value in ("sk-live-0123456789", "nightly-run", "private-plugin"):
        assert value not in text
    saved = yaml.safe_load(text)
    assert saved["mixture"]["api_key"] == REDACTED == "***"
    assert saved["run"]["name"] == REDACTED
    assert saved["plugins"]["disable"] == [REDACTED]
    # Everything else is saved as it is.
    assert saved["mixture"]["hub_token"] is None
    assert saved["backend"] == spec.resolved["backend"]
    assert saved["tasks"] == spec.resolved["tasks"]
    assert saved["run"]["seed"] == 0


def test_env_value_given_by_override_is_redacted(registry: Registry, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BA_TEST_API_KEY", "sk-from-override")
    spec = validate(registry, base_spec(), "mixture.api_key=${oc.env:BA_TEST_API_KEY}")
    assert spec.component("mixture").config.api_key == "sk-from-override"
    assert spec.redacted()["mixture"]["api_key"] == REDACTED
    assert "sk-from-override" not in spec.redacted_yaml()


def test_keys_named_like_secrets_are_redacted_even_when_written_out(registry: Registry) -> None:
    data = with_(mixture={"name": "blend", "api_key": "literal-key", "hub_token": "hf_literal"})
    spec = validate(registry, data)
    redacted = spec.redacted()
    assert redacted["mixture"]["api_key"] == REDACTED
    assert redacted["mixture"]["hub_token"] == REDACTED
    assert redacted["mixture"]["synthetic_ratio"] == 1.0
    assert "literal-key" not in spec.redacted_yaml() and "hf_literal" not in spec.redacted_yaml()
    assert spec.resolved["mixture"]["api_key"] == "literal-key", "the run itself sees the real value"


def test_missing_env_var_names_the_key(registry: Registry, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BA_TEST_SURELY_UNSET", raising=False)
    data = with_(mixture={"name": "blend", "api_key": "${oc.env:BA_TEST_SURELY_UNSET}"})
    with pytest.raises(SpecError) as info:
        parse_spec(data)
    error = info.value
    assert error.message.startswith("cannot resolve mixture.api_key")
    assert "BA_TEST_SURELY_UNSET" in error.message
    assert error.where == "the spec, key mixture.api_key"
    assert "environment variable" in error.hint


def test_env_default_is_used_when_the_var_is_unset(registry: Registry, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BA_TEST_SURELY_UNSET", raising=False)
    spec = validate(registry, with_(run={"output_dir": "${oc.env:BA_TEST_SURELY_UNSET,/tmp/ba-runs}"}))
    assert spec.run.output_dir == "/tmp/ba-runs"


# --- unknown keys ----------------------------------------------------------------------------


def test_unknown_top_level_section(registry: Registry) -> None:
    error = spec_error(registry, with_(runn={"seed": 1}))
    assert error.message == "unknown top-level section runn; did you mean run?"
    assert error.where == "the spec, key runn"
    assert "tasks" in error.hint and "mixture" in error.hint


def test_unknown_key_in_a_core_section(registry: Registry) -> None:
    error = spec_error(registry, with_(run={"seeed": 1}))
    assert error.message == "unknown key run.seeed; did you mean run.seed?"
    assert error.hint == "valid keys under run: name, output_dir, profile, seed"


def test_unknown_key_under_tasks(registry: Registry) -> None:
    error = spec_error(registry, {**base_spec(), "tasks": {"trian": {"name": "jsonl", "path": "x"}}})
    assert error.message == "unknown key tasks.trian; did you mean tasks.train?"


def test_unknown_key_in_a_component_names_its_provider(registry: Registry) -> None:
    error = spec_error(registry, with_(tasks={"train": {"name": "jsonl", "pth": "train.jsonl"}}))
    assert error.message == "unknown key tasks.train.pth; did you mean tasks.train.path?"
    assert error.where == "the spec, key tasks.train.pth"
    assert "task source 'jsonl' from beyondagent" in error.hint
    assert "(builtin)" in error.hint
    assert "limit, name, path" in error.hint


def test_unknown_key_in_a_nested_config(registry: Registry) -> None:
    error = spec_error(registry, with_(mixture={"name": "blend", "retry": {"atempts": 2}}))
    assert error.message == "unknown key mixture.retry.atempts; did you mean mixture.retry.attempts?"
    assert error.where == "the spec, key mixture.retry.atempts"
    assert "valid keys under mixture.retry" in error.hint
    assert "attempts, backoff_s" in error.hint


def test_unknown_key_without_a_close_match_has_no_suggestion(registry: Registry) -> None:
    error = spec_error(registry, with_(backend={"name": "export", "zzz": 1}))
    assert error.message == "unknown key backend.zzz"
    assert "dir, epochs, format, name" in error.hint


# --- wrong types and missing values ------------------------------------------------------------


@pytest.mark.parametrize(
    ("sections", "message"),
    [
        ({"run": {"seed": "abc"}}, "run.seed must be an integer, got 'abc' (str)"),
        ({"algorithm": {"norm_adv_by_std": "maybe"}},
         "algorithm.norm_adv_by_std must be a boolean (true/false), got 'maybe' (str)"),
        ({"plugins": {"disable": "mixers"}}, "plugins.disable must be a list of strings, got 'mixers' (str)"),
        ({"tasks": {"train": {"name": "jsonl", "path": "x", "limit": "many"}}},
         "tasks.train.limit must be an integer or null, got 'many' (str)"),
        ({"mixture": {"name": "blend", "retry": {"attempts": "lots"}}},
         "mixture.retry.attempts must be an integer, got 'lots' (str)"),
        ({"mixture": {"name": "blend", "retry": 5}}, "mixture.retry must be a RetryConfig mapping, got 5 (int)"),
        ({"mixture": {"name": "blend", "weights": "heavy"}},
         "mixture.weights must be a list of numbers (floats), got 'heavy' (str)"),
        ({"mixture": {"name": "blend", "weights": [1.0, "x"]}},
         "mixture.weights[1] must be a number (float), got 'x' (str)"),
        ({"explore": {"n": "three"}}, "explore.n must be an integer, got 'three' (str)"),
    ],
)
def test_wrong_type_names_key_expected_type_and_value(registry: Registry, sections: dict, message: str) -> None:
    error = spec_error(registry, with_(**sections))
    assert error.message == message
    key = message.split(" must be ")[0]
    assert error.where == f"the spec, key {key}"


def test_section_that_is_not_a_mapping(registry: Registry) -> None:
    error = spec_error(registry, with_(run=5))
    assert error.message == "run must be a mapping (key: value lines), got 5"


def test_spec_that_is_not_a_mapping() -> None:
    with pytest.raises(SpecError, match="must be a mapping of sections"):
        parse_spec(["run", "model"])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("drop", "key"),
    [("tasks", "tasks.train.name"), ("backend", "backend.name")],
)
def test_missing_required_section(registry: Registry, drop: str, key: str) -> None:
    data = {section: value for section, value in base_spec().items() if section != drop}
    error = spec_error(registry, data)
    assert error.message == f"missing required value {key}"
    assert f"{key}=" in error.hint


def test_missing_required_component_option(registry: Registry) -> None:
    error = spec_error(registry, with_(tasks={"train": {"name": "jsonl"}}))
    assert error.message == "missing required value tasks.train.path"
    assert error.where == "the spec, key tasks.train.path"


def test_missing_required_value_given_by_override(registry: Registry) -> None:
    spec = validate(registry, with_(tasks={"train": {"name": "jsonl"}}), "tasks.train.path=data/train.jsonl")
    assert spec.component("tasks.train").config.path == "data/train.jsonl"


def test_unknown_component_name_suggests_the_closest(registry: Registry) -> None:
    with pytest.raises(UnknownComponentError) as info:
        validate(registry, with_(mixture={"name": "blnd"}))
    assert "unknown mixer 'blnd' (did you mean 'blend'?)" in info.value.message
    assert info.value.where == "the spec, key mixture.name"


# --- plugin/name -------------------------------------------------------------------------------


@pytest.fixture
def two_providers(register_plugin, plugin_manager) -> Registry:
    assert register_plugin(SharedNamePlugin(AlphaConfig), "alpha", distribution="ba-plugin-alpha",
                           version="1.2.0").status == "ok"
    assert register_plugin(SharedNamePlugin(BetaConfig), "beta", distribution="ba-plugin-beta",
                           version="0.3.0").status == "ok"
    return Registry(plugin_manager)


def test_plugin_slash_name_selects_one_provider(two_providers: Registry) -> None:
    spec = validate(two_providers, with_(mixture={"name": "beta/shared", "beta_only": "chosen"}))
    mixture = spec.component("mixture")
    assert mixture.registration.plugin.name == "beta"
    assert mixture.config == BetaConfig(beta_only="chosen")
    assert mixture.create() == BetaConfig(beta_only="chosen")
    assert spec.resolved["mixture"] == {"name": "beta/shared", "beta_only": "chosen"}

    spec = validate(two_providers, with_(mixture={"name": "alpha/shared", "alpha_only": 5}))
    assert spec.component("mixture").registration.plugin.name == "alpha"
    assert spec.component("mixture").config == AlphaConfig(alpha_only=5)


def test_plugin_slash_name_validates_against_that_providers_config(two_providers: Registry) -> None:
    error = spec_error(two_providers, with_(mixture={"name": "alpha/shared", "beta_only": "x"}))
    assert error.message == "unknown key mixture.beta_only; did you mean mixture.alpha_only?"
    assert "the mixer 'shared' from ba-plugin-alpha 1.2.0 (alpha)" in error.hint


def test_ambiguous_name_lists_every_provider(two_providers: Registry) -> None:
    with pytest.raises(AmbiguousComponentError) as info:
        validate(two_providers, with_(mixture={"name": "shared"}))
    error = info.value
    assert "ba-plugin-alpha 1.2.0 (alpha)" in error.message
    assert "ba-plugin-beta 0.3.0 (beta)" in error.message
    assert "2 plugins" in error.message
    assert "'alpha/shared'" in error.hint and "'beta/shared'" in error.hint
    assert error.where == "the spec, key mixture.name"


def test_plugin_slash_name_of_a_plugin_without_it(two_providers: Registry) -> None:
    with pytest.raises(UnknownComponentError) as info:
        validate(two_providers, with_(mixture={"name": "inline/shared"}))
    assert "plugin 'inline' provides no mixer named 'shared'" in info.value.message
    assert "alpha/shared" in info.value.hint and "beta/shared" in info.value.hint


# --- explore and its filters -----------------------------------------------------------------


def test_explore_filters_are_validated_in_order(registry: Registry) -> None:
    data = with_(explore={
        "name": "wander", "n": 2, "max_steps": 4,
        "filters": [{"name": "confident", "threshold": 0.8}, {"name": "inline/confident"}],
    })
    spec = validate(registry, data)
    assert [f.key_path for f in spec.filters] == ["explore.filters[0]", "explore.filters[1]"]
    assert [f.config for f in spec.filters] == [MinConfidenceConfig(0.8), MinConfidenceConfig(0.5)]
    assert all(isinstance(f.create(), MinConfidence) for f in spec.filters)
    assert spec.explore.n == 2
    assert spec.component("explore").config == WanderConfig(max_steps=4)
    assert spec.resolved["explore"]["filters"] == [
        {"name": "confident", "threshold": 0.8}, {"name": "inline/confident", "threshold": 0.5}]
    assert spec.resolved["explore"]["max_steps"] == 4


def test_unknown_filter_name_points_at_its_list_index(registry: Registry) -> None:
    data = with_(explore={"filters": [{"name": "confident"}, {"name": "no_such_filter"}]})
    with pytest.raises(UnknownComponentError) as info:
        validate(registry, data)
    assert info.value.where == "the spec, key explore.filters[1].name"
    assert "unknown task filter 'no_such_filter'" in info.value.message
    assert "confident" in info.value.message


def test_unknown_key_in_a_filter_points_at_its_list_index(registry: Registry) -> None:
    error = spec_error(registry, with_(explore={"filters": [{"name": "confident", "threshhold": 0.9}]}))
    assert error.message == "unknown key explore.filters[0].threshhold; did you mean explore.filters[0].threshold?"


def test_filter_without_a_name(registry: Registry) -> None:
    error = spec_error(registry, with_(explore={"filters": [{"threshold": 0.9}]}))
    assert error.message == "missing required value explore.filters[0].name"


@pytest.mark.parametrize("filters", [{"name": "min_confidence"}, "min_confidence"])
def test_filters_must_be_a_list(registry: Registry, filters: Any) -> None:
    error = spec_error(registry, with_(explore={"filters": filters}))
    assert error.message.startswith("explore.filters must be a list of {name: ...} blocks")
    assert error.where == "the spec, key explore.filters"


def test_filter_entry_must_be_a_mapping(registry: Registry) -> None:
    error = spec_error(registry, with_(explore={"filters": ["min_confidence"]}))
    assert error.message.startswith("explore.filters[0] must be a mapping")


def test_explorer_options_without_an_explorer(registry: Registry) -> None:
    error = spec_error(registry, with_(explore={"n": 2, "max_steps": 5}))
    assert error.message == "explore.max_steps is set but no implementation is selected"
    assert error.where == "the spec, key explore"
    assert error.hint == "add explore.name to choose the explorer"


def test_summarizer_options_without_a_summarizer(registry: Registry) -> None:
    error = spec_error(registry, with_(explore={"name": "wander", "summarizer": {"model": "gpt"}}))
    assert error.message == "explore.summarizer.model is set but no implementation is selected"
    assert error.hint == "add explore.summarizer.name to choose the summarizer"


# --- spec files --------------------------------------------------------------------------------


def test_load_spec_file_reads_yaml_and_applies_overrides(registry: Registry, tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(with_(run={"name": "from-file", "seed": 1})), encoding="utf-8")
    spec = validate_spec(load_spec_file(path, ["run.seed=2"]), registry)
    assert spec.path == path
    assert (spec.run.name, spec.run.seed) == ("from-file", 2)


def test_errors_in_a_spec_file_name_the_file(registry: Registry, tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(with_(run={"sed": 1})), encoding="utf-8")
    with pytest.raises(SpecError) as info:
        validate_spec(load_spec_file(path), registry)
    assert info.value.where == f"{path}, key run.sed"


def test_duplicate_key_in_a_spec_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text("run:\n  seed: 1\n  seed: 2\nbackend:\n  name: export\n", encoding="utf-8")
    with pytest.raises(SpecError, match="key 'seed' appears twice") as info:
        load_spec_file(path)
    assert info.value.where.startswith(f"{path}, line 3")


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text("run:\n  seed: 1\n backend: [export\n", encoding="utf-8")
    with pytest.raises(SpecError, match="YAML syntax error") as info:
        load_spec_file(path)
    assert info.value.where.startswith(f"{path}, line ")


def test_missing_spec_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="spec file not found"):
        load_spec_file(tmp_path / "nope.yaml")


def test_misspelled_core_key_of_a_block_without_a_name(registry: Registry) -> None:
    error = spec_error(registry, with_(env={"servce": "local"}))
    assert "unknown key env.servce; did you mean env.service?" in str(error)


def test_logging_level_is_checked(registry: Registry) -> None:
    assert validate(registry, with_(logging={"level": "debug"})).logging.level == "debug"
    error = spec_error(registry, with_(logging={"level": "loud"}))
    assert "logging.level must be one of debug, info, warning, error, got 'loud'" in str(error)


def test_a_lora_block_validates_with_its_full_key_paths() -> None:
    from beyondagent_core.spec import ModelSection, structured

    model = structured(ModelSection, {"lora": {"rank": 4, "target_modules": ["q_proj", "v_proj"]}}, "model", "s.yaml")
    assert (model.lora.rank, model.lora.alpha, model.lora.target_modules) == (4, 16.0, ["q_proj", "v_proj"])
    for block, key, words in (({"rnak": 4}, "model.lora.rnak", "did you mean model.lora.rank"),
                              ({"rank": 0}, "model.lora.rank", "must be >= 1"),
                              ({"dropout": 1.0}, "model.lora.dropout", "< 1"),
                              ({"target_modules": "q_proj"}, "model.lora.target_modules", "a list of strings")):
        with pytest.raises(SpecError) as raised:
            structured(ModelSection, {"lora": block}, "model", "s.yaml")
        assert raised.value.where == f"s.yaml, key {key}" and words in raised.value.message, raised.value
