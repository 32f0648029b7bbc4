"""Finding the final answer in a model's text, and the reference answer in a task's ground truth.

A solution's final answer is, in order of preference:

1. the content of the **last** `\\boxed{...}` (or `\\fbox{...}`, `\\boxed 5`), braces balanced;
2. what follows the last `#### ` (GSM8K's marker), up to the end of that line;
3. what follows the last "the answer is" / "final answer:" (any case), up to the end of the
   sentence;
4. only when asked (`last_number=True`): the last number in the text. Meant for tiny models
   that never learned a format; real runs leave it off so a stray number is not an answer.

A reference (`task.ground_truth`) may be a plain answer (`"42"`, `42`), a GSM8K solution
ending in `#### 42`, or a MATH solution with a `\\boxed{}`; a list holds several acceptable
answers. Everything here is plain string work: no sympy, nothing that can hang.
"""

from __future__ import annotations

import re
from typing import Any

import attrs

BOXED_COMMANDS = ("\\boxed", "\\fbox")
_HASH = re.compile(r"####\s*(.+?)\s*$", re.MULTILINE)
_ANSWER_IS = re.compile(
    r"(?:the\s+(?:final\s+)?answer\s+is|final\s+answer\s*(?:is)?\s*:?)\s*:?\s*(.+?)(?:\.\s|\.?\s*$|\n)",
    re.IGNORECASE | re.DOTALL,
)
# A number as people write it: sign, thousands separators, decimals, a trailing percent.
_NUMBER = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?%?|-?\d+(?:\.\d+)?%?|-?\.\d+%?")


@attrs.frozen
class Extracted:
    """An answer found in a text and how it was found (`boxed`, `hash`, `answer_is`, `last_number`)."""

    answer: str
    method: str


def last_boxed(text: str) -> str | None:
    """The content of the last top-level `\\boxed{...}` / `\\fbox{...}` (or `\\boxed 5`); None if none.

    A box nested in another belongs to the outer one, whose content comes back with the inner
    `\\boxed` wrappers removed; an unclosed box is skipped.
    """
    boxes = all_boxed(text)
    return boxes[-1] if boxes else None


def all_boxed(text: str) -> list[str]:
    """Every top-level `\\boxed{}` content in order (inner boxes unwrapped)."""
    found, position = [], 0
    while True:
        starts = [i for i in (text.find(command, position) for command in BOXED_COMMANDS) if i >= 0]
        if not starts:
            return found
        start = min(starts)
        content, end = _boxed_content(text, start)
        if content is None:
            position = start + 1
            continue
        found.append(_unwrap_inner(content))
        position = end


def _unwrap_inner(content: str) -> str:
    while True:
        inner = [i for i in (content.find(command) for command in BOXED_COMMANDS) if i >= 0]
        if not inner:
            return content
        start = min(inner)
        box, end = _boxed_content(content, start)
        if box is None:
            return content
        content = content[:start] + box + content[end:]


def _boxed_content(text: str, start: int) -> tuple[str | None, int]:
    """The content of the box command at `start` and the index just past it; (None, _) if unclosed."""
    command = next(c for c in BOXED_COMMANDS if text.startswith(c, start))
    index = start + len(command)
    rest = text[index:]
    if rest.startswith(" ") and not rest.lstrip().startswith("{"):
        # `\boxed 5`: the next token is the answer.
        token = rest.strip().split(None, 1)
        if not token:
            return None, index
        return token[0].rstrip("$."), index + rest.index(token[0]) + len(token[0])
    while index < len(text) and text[index].isspace():
        index += 1
    if index >= len(text) or text[index] != "{":
        return None, index
    depth = 0
    for position in range(index, len(text)):
        char = text[position]
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return text[index + 1:position].strip(), position + 1
    return None, index


def extract_answer(text: str, *, last_number: bool = False) -> Extracted | None:
    """The final answer of a solution text (see the module docstring), or None."""
    if not isinstance(text, str) or not text.strip():
        return None
    boxed = last_boxed(text)
    if boxed:
        return Extracted(boxed, "boxed")
    hashes = _HASH.findall(text)
    if hashes and hashes[-1].strip():
        return Extracted(hashes[-1].strip(), "hash")
    stated = [m.strip().rstrip(".").strip() for m in _ANSWER_IS.findall(text)]
    stated = [s for s in stated if s]
    if stated:
        return Extracted(_unwrap_dollars(stated[-1]), "answer_is")
    if last_number:
        numbers = _NUMBER.findall(text)
        if numbers:
            return Extracted(numbers[-1], "last_number")
    return None


def _unwrap_dollars(answer: str) -> str:
    if len(answer) > 1 and answer.startswith("$") and answer.endswith("$"):
        return answer.strip("$").strip()
    return answer


def reference_answers(ground_truth: Any) -> list[str]:
    """The acceptable answers of a ground truth; an empty list when there is none.

    Strings holding a whole solution give their boxed or `####` answer; other strings and
    numbers are the answer itself; a list gives each of its items' answers.
    """
    if ground_truth is None or isinstance(ground_truth, bool):
        return []
    if isinstance(ground_truth, (int, float)):
        return [repr(ground_truth) if isinstance(ground_truth, float) else str(ground_truth)]
    if isinstance(ground_truth, (list, tuple)):
        return [answer for item in ground_truth for answer in reference_answers(item)]
    if isinstance(ground_truth, dict):
        for key in ("answer", "ground_truth", "target"):
            if key in ground_truth:
                return reference_answers(ground_truth[key])
        return []
    text = str(ground_truth).strip()
    if not text:
        return []
    boxed = last_boxed(text)
    if boxed:
        return [boxed]
    hashes = _HASH.findall(text)
    if hashes and hashes[-1].strip():
        return [hashes[-1].strip()]
    return [_unwrap_dollars(text)]
