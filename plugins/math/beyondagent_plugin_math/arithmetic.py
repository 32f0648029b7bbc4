"""`arithmetic`: procedurally generated arithmetic problems, seeded, in difficulty levels.

Offline training data a tiny model can make progress on. Each task is a random expression tree
(`operands` leaves, operators from `operators`; with `parentheses`, a random tree written with
the parentheses it needs, else a flat expression read with the usual precedence) drawn from a random
generator seeded by `(seed, split, index)`, so a task is the same however many are asked for,
and train/val/test streams differ. The answer is the exact value (`Fraction`): an integer, or a
reduced fraction like `7/3` when division is on; an expression dividing by zero is redrawn.

Levels (presets of the knobs; `level: null` uses the knobs as given):

| level | operands | operands in | operators | parentheses |
|---|---|---|---|---|
| 1 | 2 | 0..4 | + | no |
| 2 | 2 | 0..9 | + - | no |
| 3 | 3 | 0..9 | + - * | no |
| 4 | 3 | 0..99 | + - * | yes |
| 5 | 4 | 0..99 | + - * / | yes |
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from fractions import Fraction

import attrs

from beyondagent_core.jsonl import BadRecords
from beyondagent_core.types import Task
from beyondagent_plugin_math.config import ArithmeticConfig

LEVELS: dict[int, dict[str, object]] = {
    1: {"operands": 2, "max_operand": 4, "operators": ["+"], "parentheses": False},
    2: {"operands": 2, "max_operand": 9, "operators": ["+", "-"], "parentheses": False},
    3: {"operands": 3, "max_operand": 9, "operators": ["+", "-", "*"], "parentheses": False},
    4: {"operands": 3, "max_operand": 99, "operators": ["+", "-", "*"], "parentheses": True},
    5: {"operands": 4, "max_operand": 99, "operators": ["+", "-", "*", "/"], "parentheses": True},
}
_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2}


@attrs.frozen
class Problem:
    """One generated expression, its value, and its text as the model sees it."""

    expression: str
    value: Fraction

    @property
    def answer(self) -> str:
        value = self.value
        return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def settings(config: ArithmeticConfig) -> ArithmeticConfig:
    """The config with its level's preset applied (the knobs as given when `level` is None)."""
    if config.level is None:
        return config
    return attrs.evolve(config, **LEVELS[config.level])


def generate(config: ArithmeticConfig, index: int) -> Problem:
    """The problem number `index` of a config's stream (the same every time)."""
    config = settings(config)
    rng = random.Random(f"beyondagent-arithmetic:{config.seed}:{config.split}:{index}")
    high = config.max_operand if config.max_operand is not None else 10 ** config.digits - 1
    for _ in range(1000):
        problem = _draw(rng, config, high)
        if problem is not None:
            return problem
    raise ValueError(f"could not draw an expression without division by zero from {config!r}")


def _draw(rng: random.Random, config: ArithmeticConfig, high: int) -> Problem | None:
    leaves = [rng.randint(0, high) for _ in range(config.operands)]
    operators = [rng.choice(config.operators) for _ in range(config.operands - 1)]
    try:
        if config.parentheses:
            text, value, _ = _tree(rng, leaves, operators)
        else:
            text = " ".join(f"{leaf} {op}" for leaf, op in zip(leaves, operators)) + f" {leaves[-1]}"
            value = _flat_value(leaves, operators)
    except ZeroDivisionError:
        return None
    return Problem(text, value)


def _flat_value(leaves: list[int], operators: list[str]) -> Fraction:
    """`a op b op c ...` with the usual precedence: * and / first, then + and -, left to right."""
    terms, signs = [Fraction(leaves[0])], []
    for operator, leaf in zip(operators, leaves[1:]):
        if operator in "*/":
            terms[-1] = _apply(operator, terms[-1], Fraction(leaf))
        else:
            terms.append(Fraction(leaf))
            signs.append(operator)
    value = terms[0]
    for sign, term in zip(signs, terms[1:]):
        value = _apply(sign, value, term)
    return value


def _tree(rng: random.Random, leaves: list[int], operators: list[str]) -> tuple[str, Fraction, int]:
    """A random binary tree over `leaves`: (text with the parentheses it needs, value, top precedence)."""
    if len(leaves) == 1:
        return str(leaves[0]), Fraction(leaves[0]), 3
    split = rng.randint(1, len(leaves) - 1)
    left = _tree(rng, leaves[:split], operators[:split - 1])
    right = _tree(rng, leaves[split:], operators[split:])
    operator = operators[split - 1]
    precedence = _PRECEDENCE[operator]
    left_text = f"({left[0]})" if left[2] < precedence else left[0]
    # On the right, equal precedence needs parentheses too when the operator does not associate.
    grouped = right[2] < precedence or (right[2] == precedence and operator in "-/")
    right_text = f"({right[0]})" if grouped else right[0]
    return f"{left_text} {operator} {right_text}", _apply(operator, left[1], right[1]), precedence


def _apply(operator: str, a: Fraction, b: Fraction) -> Fraction:
    if operator == "+":
        return a + b
    if operator == "-":
        return a - b
    if operator == "*":
        return a * b
    return a / b  # ZeroDivisionError: the expression is redrawn


class ArithmeticSource:
    def __init__(self, config: ArithmeticConfig):
        self.config = config

    def load(self, bad: BadRecords) -> Iterator[Task]:
        config = self.config
        level = settings(config)
        for index in range(config.count):
            problem = generate(config, index)
            yield Task(
                task_id=f"arithmetic-{config.split}-{config.seed}-{index}",
                query=config.question.format(expression=problem.expression),
                ground_truth=problem.answer,
                judge=config.judge,
                metadata={"expression": problem.expression, "level": config.level, "operands": level.operands,
                          "operators": list(level.operators), "split": config.split},
            )
