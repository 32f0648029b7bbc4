"""Finding the final answer in a model's text, and the reference answer in a task's ground truth.

Before anything is read, code is set aside: fenced blocks (```` ```python ````, ```` ``` ````,
```` ```output ````..., closed or left open) and `<python>...</python>` are removed, except
```` ```latex ````/```` ```tex ````/```` ```math ```` blocks, so a number a program prints, a
comment that says "the answer is 3", or a faked tool output is never the answer. Digits of any
script read as 0-9 (`numbers.ascii_digits`).

A solution's final answer is then, in this order (the first rule that finds one decides):

1. `boxed`: the content of the **last** top-level `\\boxed{...}` (or `\\fbox{...}`,
   `\\boxed 5`), braces balanced;
2. `hash`: what follows the last `#### ` (GSM8K's marker), up to the end of that line;
3. `answer_is`: what follows the last explicit marker - "answer is" ("The final answer is",
   "My answer is"), "answer:" or "answer =" (any case, markdown bold allowed), "final answer" -
   up to the end of its first clause: the sentence's end (`. `, `!`, `?`, `;`, a new line), a
   comma or colon followed by a space, or "because", "since", "which", "so", "but". A clause
   whose rest is a hedge ("3, or maybe 4", "4, perhaps 3") keeps the hedge, so it is not a
   number. Math in `$...$`, `\\(...\\)` or `\\[...\\]` right after the marker is taken whole;
4. `bare`: the whole reply, when it is nothing but a number (`3`, `$-7/3$`, `3 apples`) or an
   arithmetic expression (`0 + 3`, `0 + 3 = 3`);
5. `last_number`, only when asked (`last_number=True`, for tiny models that never learned a
   format): the last number that stands alone (see `stated_numbers.py`): never an operand of
   an equation or expression (`5 + 3 =`, `What is 0 + 3?`), never one ruled out by "not".

What an answer may be (a number, an expression, in lowest terms) is `equivalence.py`'s
business. A reference (`task.ground_truth`) may be a plain answer (`"42"`, `42`), a GSM8K
solution ending in `#### 42`, or a MATH solution with a `\\boxed{}`; a list holds several
acceptable answers. Everything here is plain string work: no sympy, nothing that can hang.
"""

from __future__ import annotations

import re
from typing import Any

import attrs

from beyondagent_plugin_math.numbers import ascii_digits, parse_number
from beyondagent_plugin_math.stated_numbers import last_stated_number

BOXED_COMMANDS = ("\\boxed", "\\fbox")
_HASH = re.compile(r"####\s*(.+?)\s*$", re.MULTILINE)
_CODE = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n?(.*?)(?:```|\Z)"  # a fenced block, its language, its body
                   r"|<python>.*?(?:</python>|\Z)", re.DOTALL | re.IGNORECASE)
_MATH_BLOCKS = frozenset({"latex", "tex", "math"})
_MARKER = re.compile(r"\b(?:(?:final[*_\s]+)?answer[*_]*(?:\s+is\b[*_]*\s*:?|\s*[:=])"  # answer is / answer:
                     r"|final[*_\s]+answer\b[*_]*)[\s*_]*", re.IGNORECASE)
_CLAUSE_END = re.compile(r"\.(?=\s|$)|[!?;\n]|[,:]\s|\s(?:because|since|which|so|but)\b", re.IGNORECASE)
_SENTENCE_END = re.compile(r"\.(?=\s|$)|[!?;\n]")
_HEDGE = re.compile(r"[,:]?\s*(?:or|maybe|perhaps|possibly|probably)\b", re.IGNORECASE)
_DELIMITED = (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))
_ARITHMETIC = re.compile(r"(?:[\d\s.,+\-*/^()=×÷·]|\\(?:times|cdot|div))+")


@attrs.frozen
class Extracted:
    """An answer found in a text and how it was found (`boxed`, `hash`, `answer_is`, `bare`, `last_number`)."""

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
    """The final answer of a solution text (see the module docstring for the order), or None."""
    if not isinstance(text, str) or not text.strip():
        return None
    text = prose(text)
    boxed = last_boxed(text)
    if boxed:
        return Extracted(boxed, "boxed")
    hashes = _HASH.findall(text)
    if hashes and hashes[-1].strip():
        return Extracted(hashes[-1].strip(), "hash")
    stated = _after_last_marker(text)
    if stated:
        return Extracted(stated, "answer_is")
    bare = _bare(text)
    if bare:
        return Extracted(bare, "bare")
    if last_number:
        number = last_stated_number(text)
        if number is not None:
            return Extracted(number, "last_number")
    return None


def prose(text: str) -> str:
    """`text` without its code (fenced blocks but math ones, `<python>` tags), digits as 0-9."""
    def keep_math(match: re.Match) -> str:
        return (match.group(2) or "") if (match.group(1) or "").lower() in _MATH_BLOCKS else "\n"

    return ascii_digits(_CODE.sub(keep_math, text))


def _after_last_marker(text: str) -> str | None:
    """The answer stated after the last "answer is" / "answer:" marker (module docstring, rule 3)."""
    markers = list(_MARKER.finditer(text))
    if not markers:
        return None
    rest = text[markers[-1].end():]
    for opening, closing in _DELIMITED:
        if rest.startswith(opening):
            end = rest.find(closing, len(opening))
            if end > len(opening):
                return _strip_markup(rest[len(opening):end])
    for command in BOXED_COMMANDS:  # a box left open (the reply was cut): its content so far
        if rest.startswith(command + "{"):
            rest = rest[len(command) + 1:]
    sentence_end = _SENTENCE_END.search(rest)
    sentence = rest[:sentence_end.start()] if sentence_end else rest
    clause_end = _CLAUSE_END.search(sentence)
    if clause_end and not _HEDGE.match(sentence, clause_end.start()):
        sentence = sentence[:clause_end.start()]
    return _strip_markup(_unwrap_dollars(sentence.strip())) or None


def _bare(text: str) -> str | None:
    """The whole reply, when it is only a number or an arithmetic expression (rule 4)."""
    reply = _strip_markup(text.strip().rstrip("."))
    for opening, closing in _DELIMITED:
        if reply.startswith(opening) and reply.endswith(closing) and len(reply) > len(opening) + len(closing):
            reply = reply[len(opening):-len(closing)].strip()
            break
    if parse_number(reply) is not None or (_ARITHMETIC.fullmatch(reply) and re.search(r"\d", reply)):
        return reply
    return None


def _strip_markup(answer: str) -> str:
    """An answer without markdown emphasis, code ticks or quotes around it."""
    return answer.strip().strip("*_`'\"").strip()


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
