"""Plain numbers, compared exactly and without sympy: the fast path of answer checking.

Most answers (GSM8K, arithmetic) are numbers written in one of many ways: `1,234`, `1{,}234`,
`\\$12.50`, `12 cm`, `\\text{12 apples}`, `50\\%`, `2.5e-3`, `1.5 \\times 10^{3}`, `\\frac{-1}{2}`,
`-7/3`, `(-7)`, `x = 4`, `90^\\circ`. `parse_number` strips the wrappers (LaTeX spacing and
text, currency, units, degrees) and reads the value as an exact `Fraction`. math-verify gets
several of these wrong (scientific notation, `\\text{12 cm}`, `12 dollars` inside LaTeX,
space-grouped thousands, big powers of ten), and this path never hangs: an answer that is not
a plain number is left to math-verify.

Two numbers agree when they are equal, or, if either was written with decimals, when they
differ by at most one part in a million (so `0.3333333` is `1/3` but `0.333` is not). A
percentage agrees with both readings: `50%` matches `50` and `0.5`.

Digits of any script (`３`, `٣`) are read as the digits they are, and `−` (U+2212) as a minus
sign; superscripts are not digits (`3²` is not a number). A fraction is read, and says whether
it is `simplified` (integer parts in lowest terms, not equal to an integer): `6/2` and
`\frac{2}{4}` are not, which the judge uses to refuse unevaluated arithmetic (see
`equivalence.py`). Unit words after a number are at most three words, none of them a
negation or a hedge: `12 cm` is 12, `3 is not it` and `3 or four` are not numbers.
"""

from __future__ import annotations

import math
import re
import unicodedata
from fractions import Fraction

import attrs

RELATIVE_TOLERANCE = Fraction(1, 10**6)
MAX_EXPONENT = 400  # 10^400 and beyond are not "plain numbers"; math-verify decides (in its worker)

_WRAPPERS = re.compile(r"\\(?:text|textbf|textit|mathrm|mathbf|mbox|operatorname)\s*\{([^{}]*)\}")
_SPACING = re.compile(r"\\[,;:! ]|~|\\left|\\right|\\displaystyle|\\quad|\\qquad")
_DEGREES = re.compile(r"\^\s*\{?\\circ\}?|°|\\circ|\\degree")
_DECIMAL = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)"
_GROUPED = r"[+-]?\d{1,3}(?:(?:,\d{3})+|(?: \d{3})+)(?:\.\d+)?"
_PLAIN = re.compile(rf"^(?:{_GROUPED}|{_DECIMAL})$")
_E_NOTATION = re.compile(rf"^({_DECIMAL})[eE]([+-]?\d+)$")
_TIMES_TEN = re.compile(rf"^(?:({_DECIMAL})\s*(?:\\times|\\cdot|\*|x|×))?\s*10\s*\^\s*\{{?\s*([+-]?\d+)\s*\}}?$")
_LATEX_FRACTION = re.compile(r"^([+-]?)\\[dt]?frac\s*(?:\{([^{}]+)\}|(\d))\s*(?:\{([^{}]+)\}|(\d))$")
_SLASH_FRACTION = re.compile(rf"^({_DECIMAL})\s*/\s*({_DECIMAL})$")
_UNIT_WORDS = re.compile(r"^(.*?\d\.?)\s+([A-Za-z][A-Za-z .²³/^-]*)$")  # `12 cm`, never `2x`
_NOT_UNITS = frozenset("not no nor or and but maybe perhaps possibly probably never wrong incorrect isn't is".split())
MAX_UNIT_WORDS = 3
_ASSIGNMENT = re.compile(r"^[A-Za-z](?:_\{?\w+\}?)?\s*=\s*(.+)$")
_CURRENCY = re.compile(r"\\\$|\$|€|£|¥|\\euro|\bUSD\b|\bdollars?\b", re.IGNORECASE)


@attrs.frozen
class ParsedNumber:
    """A number read from an answer: its exact value, whether it had a `%`, whether it had decimals."""

    value: Fraction
    percent: bool = False
    inexact: bool = False
    simplified: bool = True
    """False for a fraction not in lowest terms or equal to an integer (`6/2`, `\\frac{2}{4}`)."""

    def readings(self) -> list[Fraction]:
        """The values it may stand for: a percentage is both `p` and `p/100`."""
        return [self.value, self.value / 100] if self.percent else [self.value]


def parse_number(answer: str) -> ParsedNumber | None:
    """The number an answer states, or None when it is not a plain number."""
    if not isinstance(answer, str) or len(answer) > 200:
        return None
    text = _clean(answer)
    percent = False
    for marker in ("\\%", "%", "percent"):
        if text.endswith(marker):
            text, percent = text[: -len(marker)].strip(), True
            break
    value = _read_value(text)
    if value is None:
        return None
    number, inexact = value
    return ParsedNumber(number, percent=percent, inexact=inexact, simplified=_simplified(text))


def ascii_digits(text: str) -> str:
    """`text` with every decimal digit (any script) as 0-9 and the minus sign U+2212 as `-`."""
    if text.isascii():
        return text
    return "".join(str(unicodedata.digit(char)) if unicodedata.category(char) == "Nd" else char
                   for char in text).replace("\u2212", "-")


def numbers_match(predicted: ParsedNumber, reference: ParsedNumber) -> bool:
    """Whether two parsed numbers state the same value (see the module docstring)."""
    inexact = predicted.inexact or reference.inexact
    for a in predicted.readings():
        for b in reference.readings():
            if a == b:
                return True
            if inexact and abs(a - b) <= RELATIVE_TOLERANCE * max(abs(a), abs(b)):
                return True
    return False


def _clean(answer: str) -> str:
    text = ascii_digits(answer).strip()
    for opening, closing in (("\\(", "\\)"), ("\\[", "\\]"), ("$", "$")):
        if text.startswith(opening) and text.endswith(closing) and len(text) > len(opening) + len(closing) - 1:
            text = text[len(opening): len(text) - len(closing)].strip()
    text = text.replace("{,}", ",").replace("\\%", "%")
    for _ in range(3):  # nested \text{\textbf{...}}
        text = _WRAPPERS.sub(r"\1", text)
    text = _SPACING.sub(" ", text)
    text = _DEGREES.sub("", text)
    text = _CURRENCY.sub("", text)
    text = text.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    text = " ".join(text.split()).strip().rstrip(".").strip()
    assignment = _ASSIGNMENT.match(text)
    if assignment:
        text = assignment.group(1).strip()
    if text.endswith("percent") or text.endswith("%"):
        return text
    unit = _UNIT_WORDS.match(text)
    if unit and not re.search(r"[eE]\d", text):
        words = unit.group(2).lower().split()
        if len(words) > MAX_UNIT_WORDS or _NOT_UNITS.intersection(words):
            return ""  # "3 is not it", "3 or four": words that change what the number says
        text = unit.group(1).strip()
    while len(text) > 2 and text.startswith("(") and text.endswith(")") and text.count("(") == 1:
        text = text[1:-1].strip()
    return text


def _read_value(text: str) -> tuple[Fraction, bool] | None:
    if _PLAIN.match(text):
        digits = text.replace(",", "").replace(" ", "")
        return Fraction(digits), "." in digits
    match = _E_NOTATION.match(text)
    if match:
        return _scaled(match.group(1), match.group(2))
    match = _TIMES_TEN.match(text)
    if match:
        return _scaled(match.group(1) or "1", match.group(2))
    match = _LATEX_FRACTION.match(text)
    if match:
        sign = match.group(1)
        numerator, denominator = match.group(2) or match.group(3), match.group(4) or match.group(5)
        top, bottom = _read_value(numerator.strip()), _read_value(denominator.strip())
        if top is None or bottom is None or bottom[0] == 0:
            return None
        value = top[0] / bottom[0]
        return (-value if sign == "-" else value), top[1] or bottom[1]
    match = _SLASH_FRACTION.match(text)
    if match:
        top, bottom = Fraction(match.group(1)), Fraction(match.group(2))
        if bottom == 0:
            return None
        return top / bottom, "." in text
    return None


def _simplified(text: str) -> bool:
    """Whether a cleaned number is in its simplest form: a fraction only in lowest terms, never an integer."""
    match = _LATEX_FRACTION.match(text)
    if match:
        parts = (match.group(2) or match.group(3), match.group(4) or match.group(5))
    else:
        match = _SLASH_FRACTION.match(text)
        if not match:
            return True
        parts = (match.group(1), match.group(2))
    top, bottom = (part.strip() for part in parts)
    if not (re.fullmatch(r"[+-]?\d+", top) and re.fullmatch(r"\d+", bottom)):
        return False  # `1.5/3`, `1/-2`
    numerator, denominator = int(top), int(bottom)
    return denominator > 1 and math.gcd(numerator, denominator) == 1


def _scaled(mantissa: str, exponent: str) -> tuple[Fraction, bool] | None:
    power = int(exponent)
    if abs(power) > MAX_EXPONENT:
        return None
    return Fraction(mantissa) * Fraction(10) ** power, "." in mantissa or power < 0
