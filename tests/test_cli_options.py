"""Numeric command-line options are range-checked as they are parsed (`beyondagent_core.arguments`):
a value out of range is a usage error (exit 2) that names the valid range, for every command,
the ones plugins add included."""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from beyondagent_core.arguments import PORT, NumberOption, number, seconds
from beyondagent_core.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "examples" / "quickstart.yaml"


def beyondagent(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("BEYONDAGENT_")}
    return subprocess.run([sys.executable, "-m", "beyondagent_core.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(("args", "message"), [
    # was "error: internal error: OverflowError: bind(): port must be 0-65535 ... please report it"
    (["env", "serve", "--env", "frozenlake", "--port", "99999"],
     "argument --port: must be an integer in [0, 65535], got 99999"),
    (["env", "serve", "--env", "frozenlake", "--call-timeout", "1e400"],
     "argument --call-timeout: must be a number in (0, 31536000], got 1e400"),
    (["env", "serve", "--env", "frozenlake", "--max-body-bytes", "12"],
     "argument --max-body-bytes: must be an integer in [1024, 1073741824], got 12"),
    (["env", "serve", "--env", "frozenlake", "--exit-with-parent", str(2**70)],
     "argument --exit-with-parent: must be an integer in [1, 2147483647]"),
    (["eval", str(QUICKSTART), "--model", "m", "--k", "100000", "--dry-run"],
     "argument --k: must be an integer in [1, 1024], got 100000"),
    (["eval", str(QUICKSTART), "--model", "m", "--limit", "0", "--dry-run"],
     "argument --limit: must be an integer in [1, 10000000], got 0"),
    (["eval", str(QUICKSTART), "--model", "m", "--temperature", "nan", "--dry-run"],
     "argument --temperature: must be a number in [0, 10], got nan"),
    (["eval", str(QUICKSTART), "--model", "m", "--seed", "-1", "--dry-run"],
     "argument --seed: must be an integer in [0, 4294967295], got -1"),
    (["eval", str(QUICKSTART), "--model", "m", "--concurrency", "two", "--dry-run"],
     "argument --concurrency: must be an integer in [1, 4096], got 'two'"),
])
def test_an_out_of_range_number_is_a_usage_error_naming_the_range(tmp_path: Path, args: list[str],
                                                                  message: str) -> None:
    proc = beyondagent(*args, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "internal error" not in proc.stderr and "Traceback" not in proc.stderr


def options(parser: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, argparse.Action]]:
    """Every option of `parser` and of its subcommands, with the command it belongs to."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from options(sub, f"{path} {name}")
        else:
            yield path, action


def test_every_numeric_option_of_every_command_is_range_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BEYONDAGENT_DISABLE_PLUGIN_AUTOLOAD", raising=False)  # the plugins' commands too
    parser, _ = build_parser(plugin_commands=True)
    found = list(options(parser, "beyondagent"))
    bare = [f"{path} {action.option_strings or action.dest}" for path, action in found
            if action.type in (int, float)]
    assert not bare, f"use beyondagent_core.arguments.number(...) as the type of {bare}"
    checked = {f"{path} {action.option_strings[0]}" for path, action in found if isinstance(action.type, NumberOption)}
    expected = {"beyondagent env serve --port", "beyondagent eval --k", "beyondagent eval --limit"}
    for plugin, option in (("view", "beyondagent view --port"), ("appworld", "beyondagent appworld generate --tasks")):
        if importlib.util.find_spec(f"beyondagent_plugin_{plugin}") is not None:  # plugin commands were walked too
            expected.add(option)
    assert expected <= checked


def test_the_type_factory() -> None:
    assert PORT("0") == 0 and PORT("65535") == 65535
    assert seconds()("0.5") == 0.5 and number(float, ge=0, le=1)("1") == 1.0
    for parse, text in ((PORT, "-1"), (PORT, "8080.0"), (seconds(), "0"), (seconds(), "inf"),
                        (number(float, gt=0, lt=1), "1"), (number(int, ge=1), "")):
        with pytest.raises(argparse.ArgumentTypeError, match="must be"):
            parse(text)
    assert number(float, gt=0, lt=1).wanted == "a number in (0, 1)" and number(int, ge=1).wanted == "an integer >= 1"
    assert number(float, le=2.5).wanted == "a number <= 2.5" and number(int).wanted == "an integer"
