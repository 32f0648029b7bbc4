"""Reading one action from what a model wrote: a small pure function, `parse_action`.

The rule, in order:

1. Where to look. If the text has an `<answer>...</answer>` tag, only the last one's content
   counts (an unclosed `<answer>` runs to the end). Otherwise, if it has an `Action:` (or
   `Answer:`) label, only the rest of the line after the last one counts. Otherwise the whole
   text counts. A tag or label always wins: text outside it is never used.
2. Action words. Inside that part, action names and their synonyms are matched as whole
   words, case-insensitively ("LEFT", "I will move left."); a word repeated is one action.
   Exactly one distinct action: that action. Two or more ("left or right"): ambiguous.
3. Action numbers. Only when no action word is there: a whole number is gymnasium's action
   index ("1", "move 2"). Exactly one distinct number in range: that action; a number out of
   range or two different numbers ("row 0, column 1"): invalid.
4. Nothing found: invalid.

Ambiguous and invalid answers give `index=None` and a `problem` to show the model.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import attrs

_ANSWER_TAG = re.compile(r"<answer>(.*?)(?:</answer>|$)", re.IGNORECASE | re.DOTALL)
_ACTION_LABEL = re.compile(r"\b(?:action|answer)\b[\s*_]*[:=][\s*_]*([^\n]*)", re.IGNORECASE)
_NUMBER = re.compile(r"(?<![\w.])[0-9]+(?![\w]|\.[0-9])")


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
    part, where = _part_to_read(text)
    named = _named_actions(part, actions, synonyms)
    if len(named) == 1:
        return ParsedAction(actions.index(named[0]))
    if len(named) > 1:
        return ParsedAction(None, f"names more than one action{where}: {', '.join(named)}")
    numbers = list(dict.fromkeys(int(match) for match in _NUMBER.findall(part)))
    if len(numbers) > 1:
        return ParsedAction(None, f"names more than one action number{where}: {', '.join(map(str, numbers))}")
    if numbers:
        if numbers[0] < len(actions):
            return ParsedAction(numbers[0])
        return ParsedAction(None, f"{numbers[0]} is not an action number (0-{len(actions) - 1})")
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


def _named_actions(part: str, actions: Sequence[str], synonyms: dict[str, str]) -> list[str]:
    """The distinct actions `part` names, in order of first mention."""
    unknown = sorted(set(synonyms.values()) - set(actions))
    if unknown:
        raise ValueError(f"synonyms name unknown actions: {', '.join(unknown)}")
    words = {action: action for action in actions} | synonyms
    by_key = {_key(word): action for word, action in words.items()}
    # Longest first, so "pick up" is read as one word before "up" could match inside it.
    alternatives = sorted(words, key=len, reverse=True)
    pattern = "|".join(re.escape(word).replace(r"\ ", r"[\s_-]*") for word in alternatives)
    found = re.finditer(rf"(?<![\w])(?:{pattern})(?![\w])", part, re.IGNORECASE)
    return list(dict.fromkeys(by_key[_key(match.group(0))] for match in found))


def _key(word: str) -> str:
    """A word with case and separators dropped: "Pick-Up", "pick up" and "pickup" are one."""
    return re.sub(r"[\s_-]+", "", word.lower())
