"""Reading one action from what a model wrote: a small pure function, `parse_action`.

The rule, in order:

1. Where to look. If the text has an `<answer>...</answer>` tag, only the last one's content
   counts (an unclosed `<answer>` runs to the end). Otherwise, if it has an `Action:` (or
   `Answer:`) label, only what follows the last one counts: the rest of its line, or the next
   line when the label ends its line. Otherwise the whole text counts. A tag or label always
   wins: text outside it is never used.
2. Action words. Inside that part, action names and their synonyms are matched as whole
   words, case-insensitively ("LEFT", "I will move left."). A word joined to another by a
   hyphen, an underscore or an apostrophe is not a match ("left-hand", "move_left",
   "up-to-date"), nor is one inside a longer word ("leftover").
3. Ruled-out words. A negation (not, don't, do not, never, avoid, no, won't, can't, cannot,
   shouldn't, instead of, rather than) rules out every action word after it up to the end of
   its clause (`. , ; : ! ?`, a new line, or "but"): "don't go left" names no action, "Not
   up; go down." is down, "go right instead of left" is right.
4. Exactly one distinct action that is not ruled out: that action (a word repeated is one
   action: "left, left!"). Two or more ("left or right", "left down right up"): ambiguous.
5. Action numbers. Only when no action word is there, and only when the part has no letters
   at all (symbols, punctuation and markdown aside: "2", "**2.**", "Action: 3",
   "<answer>0</answer>"), is a whole number gymnasium's action index. A number among words is
   not an action ("move 2", "You are at row 1, column 1."), so restating the observation never
   moves the player. Two different numbers are ambiguous; a signed, decimal or out-of-range
   number is invalid; digits are ASCII 0-9 only.
6. Nothing found: invalid.

A reply longer than 200,000 characters (a runaway generation; a chat reply is a few thousand) is
read from its last 200,000, where its answer is. Reading costs time linear in the text: a
reply made to be slow ("not not not ...", a flood of tags or labels) takes what any reply of its
length takes, ~0.2 s at the cap on a busy 2-core machine.

Ambiguous and invalid answers give `index=None` and a `problem` to show the model.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Mapping, Sequence

import attrs

_ANSWER_TAG = re.compile(r"<answer>(.*?)(?:</answer>|$)", re.IGNORECASE | re.DOTALL)
_ACTION_LABEL = re.compile(r"\b(?:action|answer)\b[\s*_]*[:=][\s*_]*([^\n]*)", re.IGNORECASE)
_NEGATION = re.compile(
    r"\b(?:not|don't|do\s+not|never|avoid|no|won't|will\s+not|can't|cannot|can\s+not|shouldn't|should\s+not|"
    r"mustn't|must\s+not|instead\s+of|rather\s+than)\b", re.IGNORECASE)
_CLAUSE_END = re.compile(r"[.,;:!?\n]|\bbut\b", re.IGNORECASE)
_WORD_EDGE = r"\w'-"  # a match may not touch these: "left-hand", "move_left", "left's" are not "left"
_NUMBER = re.compile(r"(?<![\w.])[+-]?[0-9]+(?![\w]|\.[0-9])")
_SHOWN_DIGITS = 10
MAX_TEXT = 200_000  # characters read, from the end (see the module docstring)


@attrs.frozen
class ParsedAction:
    """The action index read from a text, or None with the reason (`problem`)."""

    index: int | None
    problem: str | None = None


def parse_action(text: str, actions: Sequence[str], synonyms: Mapping[str, str] | None = None) -> ParsedAction:
    """Read one of `actions` (gymnasium's order: `actions[i]` is action `i`) from `text`.

    `synonyms` maps other words to action names (e.g. `{"west": "left"}`); a synonym may be
    several words ("pick up"). See the module docstring for the rule.
    """
    synonyms = dict(synonyms or {})
    part, where = _part_to_read(text[-MAX_TEXT:].replace("\u2019", "'"))
    named, ruled_out = _named_actions(part, actions, synonyms)
    if len(named) == 1:
        return ParsedAction(actions.index(named[0]))
    if len(named) > 1:
        return ParsedAction(None, f"names more than one action{where}: {', '.join(named)}")
    if ruled_out:
        return ParsedAction(None, f"no action found{where} (only ruled out: {', '.join(ruled_out)})")
    if any(char.isalpha() for char in part):
        return ParsedAction(None, f"no action found{where}")  # a number among words is not an action
    numbers = list(dict.fromkeys(_NUMBER.findall(part)))
    if len(numbers) > 1:
        return ParsedAction(None, f"names more than one action number{where}: {', '.join(numbers)}")
    if numbers:
        return _action_number(numbers[0], len(actions))
    return ParsedAction(None, f"no action found{where}")


def _part_to_read(text: str) -> tuple[str, str]:
    """The part of `text` the rule reads, and how to name it in a problem."""
    tags = _ANSWER_TAG.findall(text)
    if tags:
        return tags[-1], " inside <answer>"
    labels = _ACTION_LABEL.findall(text)
    if labels:
        return labels[-1], " after 'Action:'"
    return text, ""


def _named_actions(part: str, actions: Sequence[str], synonyms: dict[str, str]) -> tuple[list[str], list[str]]:
    """The distinct actions `part` names and those it rules out, each in order of first mention."""
    unknown = sorted(set(synonyms.values()) - set(actions))
    if unknown:
        raise ValueError(f"synonyms name unknown actions: {', '.join(unknown)}")
    words = {action: action for action in actions} | synonyms
    by_key = {_key(word): action for word, action in words.items()}
    # Longest first, so "pick up" is read as one word before "up" could match inside it.
    alternatives = sorted(words, key=len, reverse=True)
    pattern = "|".join(re.escape(word).replace(r"\ ", r"[\s_-]*") for word in alternatives)
    found = re.finditer(rf"(?<![{_WORD_EDGE}])(?:{pattern})(?![{_WORD_EDGE}])", part, re.IGNORECASE)
    negated = _negated_spans(part)
    starts = [start for start, _ in negated]
    named: dict[str, None] = {}
    ruled_out: dict[str, None] = {}
    for match in found:
        action = by_key[_key(match.group(0))]
        inside = bisect.bisect_right(starts, match.start()) - 1  # the last span starting at or before it
        if inside >= 0 and match.start() < negated[inside][1]:
            ruled_out[action] = None
        else:
            named[action] = None
    return list(named), [action for action in ruled_out if action not in named]


def _negated_spans(part: str) -> list[tuple[int, int]]:
    """The stretches of `part` a negation rules out: from each negation to the end of its clause,
    sorted and merged. One pass over the clause ends and a binary search per negation: a text made of
    negations ("not not not ...") costs what any text of its length does, not its length squared."""
    ends = [end.start() for end in _CLAUSE_END.finditer(part)]
    spans: list[tuple[int, int]] = []
    for negation in _NEGATION.finditer(part):
        after = bisect.bisect_left(ends, negation.end())
        start, end = negation.end(), ends[after] if after < len(ends) else len(part)
        if spans and start <= spans[-1][1]:  # in the clause of an earlier negation: one span
            spans[-1] = (spans[-1][0], max(spans[-1][1], end))
        else:
            spans.append((start, end))
    return spans


def _action_number(digits: str, count: int) -> ParsedAction:
    """A whole number as gymnasium's action index; compared as text, so a huge one costs nothing."""
    unsigned = digits.lstrip("+-").lstrip("0") or "0"
    if digits[0] not in "+-" and len(unsigned) <= len(str(count)) and int(unsigned) < count:
        return ParsedAction(int(unsigned))
    shown = digits if len(digits) <= _SHOWN_DIGITS else digits[:_SHOWN_DIGITS] + "..."
    return ParsedAction(None, f"{shown} is not an action number (0-{count - 1})")


def _key(word: str) -> str:
    """A word with case and separators dropped: "Pick-Up", "pick up" and "pickup" are one."""
    return re.sub(r"[\s_-]+", "", word.lower())
