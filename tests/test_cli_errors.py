"""Every bad input named by the core issue gets a clear message and no traceback.

Each test runs the real `beyondagent` CLI in a subprocess and checks the exit code and the
words of the message.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from spec_files import write_basic_spec

PASSTHROUGH = '''
import attrs
from beyondagent_core import MixerSpec, hookimpl

@attrs.define
class Schedule:
    kind: str = "constant"
    end: float = 0.0

@attrs.define
class PassConfig:
    keep_synthetic: bool = True
    schedule: Schedule = attrs.field(factory=Schedule)

class Passthrough:
    def __init__(self, config):
        self.config = config
    def mix(self, original, synthetic, *, epoch, seed):
        return list(original) + (list(synthetic) if self.config.keep_synthetic else [])

@hookimpl
def beyondagent_mixers():
    return [MixerSpec(name="passthrough", factory=Passthrough, config_cls=PassConfig, summary="All tasks.")]
'''


@pytest.fixture
def passthrough(make_dist):
    make_dist("beyondagent-plugin-passthrough", "passthrough", "bap_passthrough", PASSTHROUGH, version="0.3.0")


@pytest.fixture
def spec(tmp_path: Path, passthrough) -> Path:
    return write_basic_spec(tmp_path, mixer="passthrough", tasks=4, run_name="r")


def assert_clean_error(result, *words: str, code: int = 2) -> None:
    assert result.code == code, result.text
    assert "Traceback" not in result.text, result.text
    for word in words:
        assert word in result.err, f"{word!r} not in:\n{result.err}"


def test_the_spec_runs(cli, spec):
    result = cli("run", str(spec))
    assert result.code == 0, result.text
    assert "run finished" in result.out


def test_unknown_component_name(cli, spec):
    result = cli("run", str(spec), "mixture.name=passthrugh")
    assert_clean_error(result, "unknown mixer 'passthrugh'", "did you mean 'passthrough'",
                       "Available mixers:", "key mixture.name")


def test_unknown_first_party_name_hints_at_the_package(cli, spec):
    result = cli("run", str(spec), "mixture.name=ratio",
                 env={"BEYONDAGENT_DISABLED_PLUGINS": "mixers"})
    assert_clean_error(result, "unknown mixer 'ratio'", "pip install beyondagent-plugin-mixers")


def test_a_name_two_plugins_provide(cli, spec, make_dist):
    make_dist("beyondagent-plugin-other", "other", "bap_other", PASSTHROUGH, version="2.1.0")
    result = cli("run", str(spec))
    assert_clean_error(result, "mixer 'passthrough' is provided by 2 plugins",
                       "beyondagent-plugin-passthrough 0.3.0 (passthrough)",
                       "beyondagent-plugin-other 2.1.0 (other)",
                       "'other/passthrough' or 'passthrough/passthrough'")
    picked = cli("run", str(spec), "mixture.name=other/passthrough")
    assert picked.code == 0, picked.text


def test_misspelled_key(cli, spec):
    result = cli("run", str(spec), "mixture.keep_synthetc=false")
    assert_clean_error(result, "unknown key mixture.keep_synthetc", "did you mean mixture.keep_synthetic?",
                       "beyondagent-plugin-passthrough 0.3.0 (passthrough)")


def test_misspelled_nested_key(cli, spec):
    result = cli("run", str(spec), "mixture.schedule.ned=1")
    assert_clean_error(result, "unknown key mixture.schedule.ned", "did you mean mixture.schedule.end?")


def test_misspelled_core_key_and_section(cli, spec):
    assert_clean_error(cli("run", str(spec), "run.seeed=3"), "unknown key run.seeed", "did you mean run.seed?")
    assert_clean_error(cli("run", str(spec), "mixtrue.name=x"), "unknown top-level section mixtrue",
                       "did you mean mixture?")


def test_wrong_value_type(cli, spec):
    result = cli("run", str(spec), "mixture.keep_synthetic=maybe")
    assert_clean_error(result, "mixture.keep_synthetic must be a boolean", "got 'maybe'")
    result = cli("run", str(spec), "run.seed=abc")
    assert_clean_error(result, "run.seed must be an integer", "got 'abc'")


def test_missing_required_value(cli, tmp_path, passthrough):
    path = tmp_path / "spec.yaml"
    path.write_text("tasks:\n  train: {name: jsonl}\nmixture: {name: passthrough}\nbackend: {name: export}\n")
    assert_clean_error(cli("run", str(path)), "missing required value tasks.train.path")
    path.write_text("tasks:\n  train: {name: jsonl, path: x.jsonl}\nmixture: {name: passthrough}\n")
    assert_clean_error(cli("run", str(path)), "missing required value backend.name")


def test_missing_spec_file(cli):
    assert_clean_error(cli("run", "nope.yaml"), "spec file not found: nope.yaml")


def test_yaml_syntax_error_names_the_line(cli, tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("run:\n  name: x\ntasks:\n  train: {name: jsonl, path: [unclosed\nbackend: {name: export}\n")
    result = cli("validate", str(path))
    assert_clean_error(result, "YAML syntax error", "line 5")


def test_duplicate_yaml_key(cli, tmp_path):
    path = tmp_path / "dup.yaml"
    path.write_text("run:\n  seed: 1\n  seed: 2\n")
    assert_clean_error(cli("validate", str(path)), "key 'seed' appears twice", "line 3")


def test_plugin_that_fails_to_import(cli, spec, make_dist):
    make_dist("beyondagent-plugin-broken", "broken", "bap_broken", "import not_a_real_module_xyz\n")
    listing = json.loads(cli("plugins", "--json").out)
    broken = next(p for p in listing if p["name"] == "broken")
    assert broken["status"] == "error"
    assert broken["distribution"] == "beyondagent-plugin-broken"
    assert "ModuleNotFoundError" in broken["error"] and "not_a_real_module_xyz" in broken["error"]
    assert next(p for p in listing if p["name"] == "passthrough")["status"] == "ok"
    # The run does not need it, so it still works; the table shows the reason.
    assert cli("run", str(spec)).code == 0
    table = cli("plugins")
    assert table.code == 0 and "not_a_real_module_xyz" in table.out


def test_unknown_name_mentions_broken_plugins(cli, spec, make_dist):
    make_dist("beyondagent-plugin-broken", "broken", "bap_broken", "raise ImportError('needs foo')\n")
    result = cli("run", str(spec), "mixture.name=fancy")
    assert_clean_error(result, "unknown mixer 'fancy'", "failed to load and may provide it", "needs foo")


def test_plugin_whose_hook_raises(cli, spec, make_dist):
    make_dist("beyondagent-plugin-raiser", "raiser", "bap_raiser", '''
        from beyondagent_core import hookimpl
        @hookimpl
        def beyondagent_mixers():
            raise RuntimeError("boom in registration")
    ''')
    listing = {p["name"]: p for p in json.loads(cli("plugins", "--json").out)}
    assert listing["raiser"]["status"] == "error"
    assert "hook beyondagent_mixers raised RuntimeError: boom in registration" in listing["raiser"]["error"]
    assert cli("run", str(spec)).code == 0


def test_plugin_implementing_a_hook_that_does_not_exist(cli, spec, make_dist):
    make_dist("beyondagent-plugin-typo", "typo", "bap_typo", '''
        from beyondagent_core import hookimpl
        @hookimpl
        def beyondagent_mixer():
            return []
    ''')
    listing = {p["name"]: p for p in json.loads(cli("plugins", "--json").out)}
    assert listing["typo"]["status"] == "error"
    assert "unknown hook beyondagent_mixer (did you mean beyondagent_mixers?)" in listing["typo"]["error"]


def test_plugin_returning_the_wrong_record(cli, make_dist):
    make_dist("beyondagent-plugin-wrong", "wrong", "bap_wrong", '''
        from beyondagent_core import hookimpl, EnvSpec
        @hookimpl
        def beyondagent_mixers():
            return [EnvSpec(name="x", factory=dict)]
    ''')
    listing = {p["name"]: p for p in json.loads(cli("plugins", "--json").out)}
    assert "returned EnvSpec, expected a list of MixerSpec records" in listing["wrong"]["error"]


def test_plugins_require_not_satisfied(cli, spec):
    result = cli("run", str(spec), "plugins.require=[beyondagent-plugin-passthrough>=9]")
    assert_clean_error(result, "required 'beyondagent-plugin-passthrough>=9'",
                       "beyondagent-plugin-passthrough 0.3.0 is installed", "pip install")
    result = cli("run", str(spec), "plugins.require=[beyondagent-plugin-nothere]")
    assert_clean_error(result, "'beyondagent-plugin-nothere' is not installed")
    assert cli("validate", str(spec), "plugins.require=['beyondagent-plugin-passthrough>=0.3,<1']").code == 0


def test_malformed_jsonl(cli, spec, tmp_path):
    data = tmp_path / "train.jsonl"
    lines = data.read_text().splitlines()
    lines.insert(1, "{not json")
    lines.insert(3, json.dumps({"query": "no id"}))
    data.write_text("\n".join(lines) + "\n")
    result = cli("run", str(spec))
    assert_clean_error(result, "malformed record: not valid JSON", f"{data}:2", "--on-bad-record=skip")
    skipped = cli("run", str(spec), "--on-bad-record=skip")
    assert skipped.code == 0, skipped.text
    events = [json.loads(line) for line in (tmp_path / "runs" / "r" / "events.jsonl").read_text().splitlines()]
    bad = [e for e in events if e["event"] == "data.bad_record"]
    assert [e["where"] for e in bad] == [f"{data}:2", f"{data}:4"]
    assert "missing required field(s) for Task: task_id" in bad[1]["reason"]
    ready = next(e for e in events if e["event"] == "data.ready")
    assert ready["original"] == 4 and ready["skipped_bad_records"] == 2


def test_malformed_parquet_rows(cli, spec, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "train.parquet"
    pq.write_table(pa.Table.from_pylist([
        {"data_source": "gsm8k", "prompt": [{"role": "user", "content": "1+1?"}],
         "reward_model": {"style": "rule", "ground_truth": "2"}},
        {"data_source": "gsm8k", "prompt": None, "reward_model": {"style": "rule", "ground_truth": "3"}},
    ]), path)
    result = cli("run", str(spec), "tasks.train.name=parquet", f"tasks.train.path={path}")
    assert_clean_error(result, "missing column 'prompt'", f"{path} row 1")
    assert cli("run", str(spec), "tasks.train.name=parquet", f"tasks.train.path={path}",
               "--on-bad-record=skip").code == 0


def test_not_a_parquet_file(cli, spec, tmp_path):
    path = tmp_path / "fake.parquet"
    path.write_text("hello")
    assert_clean_error(cli("run", str(spec), "tasks.train.name=parquet", f"tasks.train.path={path}"),
                       "cannot read parquet file", str(path))


def test_bad_override_syntax(cli, spec):
    assert_clean_error(cli("run", str(spec), "mixture.name"), "is not KEY=VALUE")


def test_factory_rejecting_its_config(cli, spec):
    result = cli("run", str(spec), "backend.format=csv")
    assert_clean_error(result, "invalid backend: format must be one of jsonl, parquet, got 'csv'", "export")


def test_missing_secret_environment_variable(cli, spec):
    result = cli("validate", str(spec), "run.name=${oc.env:BEYONDAGENT_TEST_UNSET_VAR}")
    assert_clean_error(result, "cannot resolve run.name", "BEYONDAGENT_TEST_UNSET_VAR")


# --- hardening: specs that are not specs, and run directories that cannot be -------------------

BOMB = "".join(f"{name}: &{name} [{', '.join([f'*{prev}'] * 9) if prev else ', '.join(['lol'] * 9)}]\n"
               for prev, name in zip([None, *"abcdef"], "abcdefg"))


@pytest.mark.parametrize(("text", "words"), [
    (BOMB, ["the spec is too big to read: more than 100000 values once aliases (*name) are expanded", "line 6"]),
    ("x: " + "[" * 5000 + "]" * 5000 + "\n", ["the spec is too big to read: nesting deeper than 32 levels"]),
    ("x: &a [*a]\n", ["the spec is too big to read: nesting deeper than 32 levels"]),
])
def test_alias_bombs_and_deep_nesting_are_refused_quickly(cli, tmp_path, text, words):
    path = tmp_path / "bomb.yaml"
    path.write_text(text)
    assert_clean_error(cli("validate", str(path)), *words, f"where: {path}")


def test_an_alias_bomb_in_an_override_is_refused(cli, spec):
    bomb = "{a: &a [1,1,1,1,1,1,1,1,1,1], b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a], c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]," \
           " d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c], e: [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]}"
    assert_clean_error(cli("validate", str(spec), f"run.extra={bomb}"), "more than 100000 values")


def test_a_binary_file_as_spec(cli, tmp_path):
    path = tmp_path / "model.bin"
    path.write_bytes(b"run: x\n\x00\xff\xfe\x80binary")
    assert_clean_error(cli("validate", str(path)), "the spec is not UTF-8 text (byte 8 is 0xff)",
                       "a spec is a YAML text file")


def test_a_huge_spec_file(cli, tmp_path):
    path = tmp_path / "huge.yaml"
    path.write_text("# " + "x" * (1 << 20) + "\n")
    assert_clean_error(cli("validate", str(path)), "a spec file may be at most 1048576")


def test_a_byte_order_mark_is_fine(cli, spec):
    spec.write_bytes(b"\xef\xbb\xbf" + spec.read_bytes())
    result = cli("validate", str(spec))
    assert result.code == 0, result.text


@pytest.mark.parametrize("name", ["", "../escape", "a/b", "x" * 101, ".hidden"])
def test_run_names_that_are_not_one_directory(cli, spec, name):
    assert_clean_error(cli("validate", str(spec), f"run.name={name}"),
                       "run.name must be 1-100 letters, digits", "names the run directory under output_dir")


def test_output_dir_that_is_a_file(cli, spec, tmp_path):
    (tmp_path / "afile").write_text("x")
    assert_clean_error(cli("run", str(spec), f"run.output_dir={tmp_path / 'afile'}"),
                       f"cannot write the run directory {tmp_path / 'afile' / 'r'}: Not a directory",
                       "keys run.output_dir and run.name", "point run.output_dir at a writable directory")


def test_overrides_may_follow_an_option(cli, spec):
    assert cli("run", str(spec), "--dry-run", "run.name=after_an_option").code == 0
    result = cli("run", str(spec), "--dry-run", "mixture.name=after_an_option")  # applied: refused by name
    assert_clean_error(result, "after_an_option")


def test_an_unknown_option_after_the_spec_is_still_refused(cli, spec):
    result = cli("run", str(spec), "--dry-run", "--nope")
    assert result.code == 2 and "unrecognized arguments: --nope" in result.err
