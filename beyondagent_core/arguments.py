"""Range-checked numbers for command-line options: the one argparse `type` every command uses.

    parser.add_argument("--port", type=PORT, default=8000)
    parser.add_argument("--k", type=number(int, ge=1, le=1024), default=8)

A value that is not a number of that kind, NaN, infinite or out of range is a usage error:
argparse prints `argument --port: must be an integer in [0, 65535], got 99999` and exits with 2,
before any command code runs (which would otherwise meet it as an OverflowError deep inside,
an "internal error"). Plugins' commands (the `beyondagent_commands` hook) use the same factory;
`tests/test_cli_options.py` walks every command's options and refuses a bare `type=int` or
`type=float`. Config fields are checked by `checks.number`; this is its command-line twin.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any

SECONDS_MAX = 365 * 24 * 3600  # a timeout or TTL longer than a year is a typo, and overflows some timers
SEED_MAX = 2**32 - 1  # numpy's and most libraries' seed range


class NumberOption:
    """An argparse `type`: text -> a number of `kind` within the bounds, else ArgumentTypeError."""

    def __init__(self, kind: type, *, gt: float | None = None, ge: float | None = None,
                 lt: float | None = None, le: float | None = None):
        if kind not in (int, float):
            raise TypeError(f"number() takes int or float, not {kind!r}")
        self.kind = kind
        self.gt, self.ge, self.lt, self.le = gt, ge, lt, le
        self.wanted = f"{'an integer' if kind is int else 'a number'}{_describe(gt, ge, lt, le)}"
        self.__name__ = kind.__name__  # argparse names the type in some messages

    def __call__(self, text: str) -> Any:
        try:
            value = self.kind(text)
        except (TypeError, ValueError):
            raise argparse.ArgumentTypeError(f"must be {self.wanted}, got {text!r}") from None
        if (isinstance(value, float) and not math.isfinite(value)) or not self.within(value):
            raise argparse.ArgumentTypeError(f"must be {self.wanted}, got {text}")
        return value

    def within(self, value: float) -> bool:
        return ((self.gt is None or value > self.gt) and (self.ge is None or value >= self.ge)
                and (self.lt is None or value < self.lt) and (self.le is None or value <= self.le))

    def __repr__(self) -> str:
        return f"number({self.kind.__name__}: {self.wanted})"


def number(kind: type = int, *, gt: float | None = None, ge: float | None = None, lt: float | None = None,
           le: float | None = None) -> Callable[[str], Any]:
    """The argparse `type` for an option holding a number of `kind` (int or float) within the bounds."""
    return NumberOption(kind, gt=gt, ge=ge, lt=lt, le=le)


def seconds(*, le: float = SECONDS_MAX) -> Callable[[str], float]:
    """A duration in seconds: more than 0, at most `le`."""
    return number(float, gt=0, le=le)


def _describe(gt: float | None, ge: float | None, lt: float | None, le: float | None) -> str:
    low, high = (gt, "(") if gt is not None else (ge, "["), (lt, ")") if lt is not None else (le, "]")
    if low[0] is not None and high[0] is not None:
        return f" in {low[1]}{_bound(low[0])}, {_bound(high[0])}{high[1]}"
    if low[0] is not None:
        return f" {'>' if gt is not None else '>='} {_bound(low[0])}"
    if high[0] is not None:
        return f" {'<' if lt is not None else '<='} {_bound(high[0])}"
    return ""


def _bound(value: float) -> str:
    """65535, not 65535.0 or 6.5535e+04."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


PORT = number(int, ge=0, le=65535)
SEED = number(int, ge=0, le=SEED_MAX)


def add_spec_arguments(parser: argparse.ArgumentParser, *, spec_help: str = "the spec YAML file",
                       example: str = "mixture.synthetic_ratio=2") -> None:
    """What every command that runs a spec takes: SPEC, KEY=VALUE overrides, --on-bad-record, --profile."""
    from beyondagent_core.jsonl import BAD_RECORD_POLICIES

    parser.add_argument("spec", help=spec_help)
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help=f"dot-list overrides, e.g. {example}")
    parser.add_argument("--on-bad-record", choices=BAD_RECORD_POLICIES, default="fail",
                        help="a malformed task record: fail (default) or skip it (counted and logged)")
    add_profile_option(parser)


def add_profile_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", metavar="NAME", default=None,
                        help="merge the spec's `profiles.NAME` block over it first (e.g. smollm2: the example "
                             "with the real model); overrides still win")
