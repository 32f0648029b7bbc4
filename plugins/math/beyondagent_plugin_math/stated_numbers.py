"""The `last_number` fallback: the last number a text *states*, not the last digit it mentions.

Only used when a judge opts in (`last_number: true`, for tiny models that never learned a
format) and no marked answer was found. A reply that restates its question or an equation
must not score with the operands it copied (`What is 0 + 3?`, `The sentence "5 + 3 =` used
to score 1 for 0 + 3). So a number is skipped when:

- it is an operand: an operator stands right before it (`+ - * / ^ × ÷ ·`, `\\times`,
  `\\cdot`, `\\div`, or the words plus, minus, times, over, by), or an operator, `=` or a
  comparison right after it (`5 + 3 =`: both 5 and 3). A number right after `=` is a result
  and counts (`5 - 2 = 3` states 3). A `-` right after a number or `)` is a minus, not a
  sign (`5-3` and `x-3` are two operands, not -3; `is -3` states -3);
- it is ruled out: "not", "no", "never", "isn't", `≠` or `\\neq` right before it (`4, not 3`
  states 4; `not 3` states nothing).

The answer is the last number left (None when none is). Spaces and tabs around operators are
looked through, line breaks are not. A number glued to a word still counts (`as4` states 4:
the tiny model's byte-level replies glue digits to word pieces). Digits are ASCII here (the
caller converts).
"""

from __future__ import annotations

import re

_NUMBER = re.compile(r"(?<![\d.])-?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)%?")
_OPERATOR_BEFORE = re.compile(r"(?:[+\-*/^×÷·]|\\(?:times|cdot|div)|\b(?:plus|minus|times|over|by))[ \t]*$",
                              re.IGNORECASE)
_OPERATOR_AFTER = re.compile(r"^[ \t]*(?:[+\-*/^×÷·=<>≤≥≠]|\\(?:times|cdot|div|neq|ne|leq|geq|le|ge)\b|"
                             r"(?:plus|minus|times|over|divided|multiplied)\b)", re.IGNORECASE)
_RULED_OUT = re.compile(r"(?:\b(?:not|no|never|isn't|is\s+not)|≠|\\neq?)[ \t]*$", re.IGNORECASE)
_OPERAND_END = re.compile(r"(?:[\d)\]}][ \t]*|\w)$")  # `5 -3`, `(1)-3`, `x-3`: the minus is binary
_WINDOW = 24  # characters looked at on each side: enough for "is not " or "multiplied"


def last_stated_number(text: str) -> str | None:
    """The last number `text` states (see the module docstring), or None."""
    for match in reversed(list(_NUMBER.finditer(text))):
        number = match.group(0)
        before, after = text[max(0, match.start() - _WINDOW):match.start()], text[match.end():match.end() + _WINDOW]
        if number.startswith("-") and _OPERAND_END.search(before):
            continue  # `5-3`: a minus between operands
        if _OPERATOR_BEFORE.search(before) or _OPERATOR_AFTER.match(after) or _RULED_OUT.search(before):
            continue
        return number
    return None
