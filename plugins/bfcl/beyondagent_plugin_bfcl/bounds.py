"""Argument caps on BFCL's backend functions, checked before a call runs (no `bfcl_eval` import).

A few of BFCL's functions do as much work as their arguments ask for, in one C operation that
never gives the GIL back: `power(base=10, exponent=100000000000)` is `10 ** 100000000000`, a
number of 10**11 digits (~40 GB) that BFCL could not even print. Each such function has a rule here;
a call that breaks it is not run, and the model reads why, worded as BFCL words a failed call
(`Error during execution: ...`). The caps are where the work stops being a function result:

- `power` (MathAPI), both arguments integers: the result has at most 4,300 digits, Python's own
  limit on writing an int as text (`sys.int_info.default_max_str_digits`): BFCL fails on a longer
  result anyway, after computing it;
- `logarithm` and `square_root` (MathAPI): `precision` at most 1,000 digits (`mpmath`'s log at
  1,000 digits: ~7 ms here, 30,000: 1.5 s, 3,000,000: > 15 s; `decimal`'s sqrt at 1,000: < 1 ms,
  5,000,000: > 15 s);
- `round_number` (MathAPI): `decimal_places` from -1,000 to 1,000 (rounding an int to -n places
  computes 10**n: n = 10**9 never ends).

Floats need no cap (float arithmetic is bounded; an overflow is an error BFCL reports). A
precision written as text (`"3000000"`) is read as the number it is (`mpmath` accepts text).
What these caps do not foresee is still bounded in time and memory by the process the calls run
in (`sandbox.py`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

MAX_DIGITS = 4300  # sys.int_info.default_max_str_digits (Python 3.11's default)
MAX_PRECISION = 1000
MAX_DECIMAL_PLACES = 1000
WHERE = "(docs/bfcl.md, 'Bounds')"


def _number(value: Any) -> int | float | None:
    """`value` as a number when it is one or numeric text (`mpmath` reads text), else None (BFCL
    reports the type error itself)."""
    if isinstance(value, (int, float)):  # bool too
        return value
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _power(arguments: dict[str, Any]) -> str | None:
    base, exponent = arguments.get("base"), arguments.get("exponent")
    if not (isinstance(base, int) and isinstance(exponent, int)) or exponent <= 0 or abs(base) <= 1:
        return None  # float powers are bounded; 0, 1, -1 to any power are too
    try:  # |base| ** exponent has floor(exponent * log10|base|) + 1 digits (10 ** 4300 has 4,301)
        digits = math.floor(exponent * math.log10(abs(base))) + 1
    except OverflowError:  # an exponent too large for a float: far past the cap
        digits = math.inf
    if digits <= MAX_DIGITS:
        return None
    about = f"about {digits:.3g}" if math.isfinite(digits) else "more than 10**308"
    return f"its result would have {about} digits; an integer result may have at most {MAX_DIGITS:,} here {WHERE}"


def _at_most(key: str, cap: int, allowed: str) -> Callable[[dict[str, Any]], str | None]:
    def check(arguments: dict[str, Any]) -> str | None:
        value = _number(arguments.get(key))
        if value is None or abs(value) <= cap:  # a NaN is not <= cap: refused too
            return None
        return f"{key}={arguments.get(key)!r:.40} is outside what this environment allows, {allowed} {WHERE}"

    return check


BOUNDS: dict[tuple[str, str], Callable[[dict[str, Any]], str | None]] = {
    ("MathAPI", "power"): _power,
    ("MathAPI", "logarithm"): _at_most("precision", MAX_PRECISION, f"at most {MAX_PRECISION:,} digits"),
    ("MathAPI", "square_root"): _at_most("precision", MAX_PRECISION, f"at most {MAX_PRECISION:,} digits"),
    ("MathAPI", "round_number"): _at_most("decimal_places", MAX_DECIMAL_PLACES,
                                         f"from -{MAX_DECIMAL_PLACES:,} to {MAX_DECIMAL_PLACES:,}"),
}


def refusal(class_name: str | None, name: str, arguments: dict[str, Any]) -> str | None:
    """Why the call `name(**arguments)` on a `class_name` backend must not run, or None when it may."""
    check = BOUNDS.get((class_name or "", name))
    return check(arguments) if check is not None else None
