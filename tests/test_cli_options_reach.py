"""Every `beyondagent` option reaches what it controls, and every way a command can end is reported
as it says (ninth audit, class-wide: the survivors of the eighth were options tested at their
default only, and the error and interrupt branches of `cli.main`).

- `--profile NAME` reaches `run`, `run --dry-run` and `validate` (the profile sets a value the
  output shows); an undefined profile is a spec error naming it.
- The spec's `logging.level` reaches the console of a run (`warning`: no info events), and `-v`
  overrides it.
- Words after an option are overrides only when every one is `KEY=VALUE` not starting with `-`.
- A command raising a bug (not a BeyondAgentError) exits 1 with "internal error" and the hint to
  use `-v`, and with `-v` the traceback instead; a BeyondAgentError's cause is printed with `-v`
  only; a run's `Interrupted` by SIGTERM exits 143 and says where it stopped.

The CLI's `main` in-process, as test_audit8_cli_run_flags.py does; plugin commands come from an
entry point made here.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
import yaml
from spec_files import write_basic_spec
from test_audit8_cli_run_flags import only_plugin

from beyondagent_core import cli

FAILING_COMMAND = '''
import signal

from beyondagent_core import CommandSpec, hookimpl
from beyondagent_core.errors import RunError
from beyondagent_core.interrupts import Interrupted


def add_fail(parser):
    parser.add_argument("how")

    def handler(args):
        if args.how == "bug":
            raise RuntimeError("a bug in the command")
        if args.how == "sigterm":
            raise Interrupted("stopped at step 3 of 9 (SIGTERM)", signum=signal.SIGTERM)
        try:
            raise ConnectionError("the cause of it all")
        except ConnectionError as exc:
            raise RunError("the endpoint is unreachable") from exc
    return handler


@hookimpl
def beyondagent_commands():
    return [CommandSpec(name="check-fail", factory=add_fail, summary="Fail in a chosen way.")]
'''


@pytest.fixture
def failing_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    only_plugin(tmp_path, monkeypatch, "failing_command_plugin", FAILING_COMMAND)


def profiled_spec(tmp_path: Path) -> Path:
    """Three seed tasks; the profile `one` keeps one of them and names the run `profiled`."""
    path = write_basic_spec(tmp_path, mixer="original", tasks=3, run_name="plain")
    spec = yaml.safe_load(path.read_text())
    spec["profiles"] = {"one": {"run": {"name": "profiled"}, "tasks": {"train": {"limit": 1}}}}
    path.write_text(yaml.safe_dump(spec))
    return path


def test_the_profile_reaches_run_dry_run_and_validate(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    spec = profiled_spec(tmp_path)
    assert cli.main(["run", str(spec), "--dry-run", "--profile", "one"]) == 0
    assert "original tasks: 1 " in capsys.readouterr().out

    assert cli.main(["validate", str(spec), "--profile", "one"]) == 0
    shown = yaml.safe_load(capsys.readouterr().out.split("\n", 1)[1])
    assert shown["run"]["name"] == "profiled" and shown["tasks"]["train"]["limit"] == 1

    assert cli.main(["run", str(spec), "--profile", "one"]) == 0
    assert '"tasks": 1' in capsys.readouterr().out
    assert (tmp_path / "runs" / "profiled").is_dir() and not (tmp_path / "runs" / "plain").exists()

    assert cli.main(["run", str(spec), "--dry-run", "--profile", "two"]) == 2
    assert "profile 'two' is not defined; this spec defines one" in capsys.readouterr().err


def test_the_specs_logging_level_reaches_the_console_and_verbose_overrides_it(tmp_path: Path, capsys) -> None:
    spec = write_basic_spec(tmp_path, mixer="original", tasks=2, run_name="quiet")
    assert cli.main(["run", str(spec)]) == 0
    assert "run.started" in capsys.readouterr().err  # info events at the default level
    assert cli.main(["run", str(spec), "logging.level=warning"]) == 0
    assert "run.started" not in capsys.readouterr().err
    assert cli.main(["run", str(spec), "logging.level=warning", "-v"]) == 0
    assert "run.started" in capsys.readouterr().err


@pytest.mark.parametrize("words", [["--nope=1"], ["run.name=x", "stray"], ["-x=1"]])
def test_words_after_an_option_are_overrides_only_when_each_is_key_equals_value(tmp_path: Path, capsys,
                                                                               words: list[str]) -> None:
    spec = write_basic_spec(tmp_path, mixer="original", tasks=2, run_name="r")
    with pytest.raises(SystemExit) as exited:
        cli.main(["run", str(spec), "--dry-run", *words])
    assert exited.value.code == 2
    assert f"unrecognized arguments: {' '.join(words)}" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "code", "present", "absent"), [
    (["check-fail", "bug"], 1,
     ["error: internal error: RuntimeError: a bug in the command", "hint: run again with -v for the traceback"],
     ["Traceback"]),
    (["check-fail", "bug", "-v"], 1, ["error: internal error: RuntimeError", "Traceback", "raise RuntimeError"],
     ["hint: run again with -v"]),
    (["-v", "check-fail", "bug"], 1, ["Traceback"], ["hint: run again with -v"]),
    (["check-fail", "bug", "--verbose"], 1, ["Traceback"], ["hint: run again with -v"]),
    (["check-fail", "cause"], 1, ["error: the endpoint is unreachable"], ["Traceback", "the cause of it all"]),
    (["check-fail", "cause", "-v"], 1, ["error: the endpoint is unreachable", "Traceback",
                                         "ConnectionError: the cause of it all"], []),
    (["check-fail", "sigterm"], 143, ["interrupted: stopped at step 3 of 9 (SIGTERM)"], ["Traceback", "error"]),
])
def test_each_way_a_command_ends_is_reported_as_it_says(failing_command, capsys, argv: list[str], code: int,
                                                        present: list[str], absent: list[str]) -> None:
    assert cli.main(argv) == code
    err = capsys.readouterr().err
    for text in present:
        assert text in err, err
    for text in absent:
        assert text not in err, err


def test_the_exit_code_of_a_stop_by_signal_is_128_plus_its_number() -> None:
    from beyondagent_core.interrupts import Interrupted

    assert Interrupted(signum=signal.SIGTERM).exit_code == 143 and Interrupted().exit_code == 130
