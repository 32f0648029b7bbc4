"""The spec blocks of the math plugin's components (attrs classes, validated by the core's spec).

Kept free of heavy imports so `beyondagent plugins` and spec validation stay fast.
"""

from __future__ import annotations

import attrs

from beyondagent_core.checks import (
    CHARS_WHY,
    CONCURRENCY_WHY,
    FRACTION_WHY,
    MAX_CHARS,
    MAX_CONCURRENCY,
    MAX_MB,
    MAX_REWARD,
    MAX_SECONDS,
    MAX_SEED,
    MAX_TASKS,
    MAX_TEMPERATURE,
    MAX_TOKENS,
    MAX_TURNS,
    MB_WHY,
    MISSING,
    REWARD_WHY,
    SECONDS_WHY,
    SEED_WHY,
    TASKS_WHY,
    TEMPERATURE_WHY,
    TOKENS_WHY,
    TURNS_WHY,
    names,
    number,
)

ARITHMETIC_OPERATORS = ("+", "-", "*", "/")
_TOO_LONG = "time: longer expressions and larger numbers than any model should read"
SPLITS = ("train", "val", "test")


_tokens = number(ge=1, le=MAX_TOKENS, why=TOKENS_WHY)
_temperature = number(ge=0, le=MAX_TEMPERATURE, why=TEMPERATURE_WHY)
_top_p = number(gt=0, le=1, why=FRACTION_WHY)
_score = number(ge=-MAX_REWARD, le=MAX_REWARD, why=REWARD_WHY)
_sandbox_seconds = number(gt=0, le=3600, why="time: an hour for one run of the model's code")


# --- task sources -----------------------------------------------------------------------------


@attrs.define
class MathJsonlConfig:
    """`path`: a JSONL file of math problems, one object per line.

    `question_field` names the question; `answer_field` the answer: a GSM8K solution ending in
    `#### 42`, a MATH solution with `\\boxed{...}`, or a plain answer (kept whole as the task's
    ground truth; the judge finds the final answer in it). `id_field` (optional) names a task
    id; without it ids are `<prefix>-<line>`. `judge` is set on every task when given.
    """

    path: str = MISSING
    question_field: str = "question"
    answer_field: str = "answer"
    id_field: str | None = None
    id_prefix: str | None = None
    limit: int | None = attrs.field(default=None, validator=number(ge=0, le=MAX_TASKS, why=TASKS_WHY))
    judge: str | None = attrs.field(default=None, metadata=names("reward"))


@attrs.define
class ArithmeticConfig:
    """Procedurally generated arithmetic, seeded: the same config always gives the same tasks.

    `level` (1-5) picks a preset of the other knobs (see `arithmetic.LEVELS`); set the knobs
    yourself with `level: null`. `operands` per expression, each with `digits` digits (or in
    `0..max_operand` when that is set); `operators` from `+ - * /` (division gives exact
    fractions such as `7/3`); `parentheses`: group sub-expressions. `split` and `seed` make
    disjoint streams (train/val/test differ for the same seed).
    """

    count: int = attrs.field(default=256, validator=number(ge=1, le=MAX_TASKS, why=TASKS_WHY))
    split: str = "train"
    seed: int = attrs.field(default=0, validator=number(ge=0, le=MAX_SEED, why=SEED_WHY))
    level: int | None = attrs.field(default=1, validator=number(ge=1, le=5, why="meaning: levels 1 to 5 are defined"))
    operands: int = attrs.field(default=2, validator=number(ge=2, le=100, why=_TOO_LONG))
    digits: int = attrs.field(default=1, validator=number(ge=1, le=18, why=_TOO_LONG))
    max_operand: int | None = attrs.field(default=None, validator=number(ge=1, le=10**18, why=_TOO_LONG))
    operators: list[str] = attrs.field(factory=lambda: ["+", "-"])
    parentheses: bool = False
    question: str = "What is {expression}?"
    judge: str | None = attrs.field(default=None, metadata=names("reward"))

    def __attrs_post_init__(self) -> None:
        unknown = [op for op in self.operators if op not in ARITHMETIC_OPERATORS]
        if unknown or not self.operators:
            raise ValueError(f"operators must be a non-empty list from {' '.join(ARITHMETIC_OPERATORS)}, "
                             f"got {list(self.operators)!r}")
        if "{expression}" not in self.question:
            raise ValueError("question must contain {expression}")
        if self.level is not None and self.level > 5:
            raise ValueError(f"level must be 1..5 (or null to set the knobs yourself), got {self.level}")


# --- workflows --------------------------------------------------------------------------------

COT_SYSTEM_PROMPT = ("Solve the math problem step by step. Put the final answer in \\boxed{}, "
                     "for example \\boxed{42}.")

TOOL_SYSTEM_PROMPT = """\
Solve the math problem. You may run Python to compute: write a code block

```python
print(2 ** 10)
```

and stop; its output comes back to you. Each block runs in a fresh Python process (numpy and
sympy may be imported when installed), so print what you need. When you are done, give the
final answer in \\boxed{}, for example \\boxed{42}."""


@attrs.define
class MathCotConfig:
    """One turn: the model reasons and answers in `\\boxed{}`.

    `system_prompt` opens the conversation (empty: none). A task carrying verl-style chat
    messages in `metadata.prompt` (from the `parquet` source) is asked with those messages as
    they are when `use_task_prompt` is on. Sampling keys left unset use the backend's.
    """

    system_prompt: str = COT_SYSTEM_PROMPT
    use_task_prompt: bool = True
    temperature: float | None = attrs.field(default=None, validator=_temperature)
    top_p: float | None = attrs.field(default=None, validator=_top_p)
    max_tokens: int | None = attrs.field(default=None, validator=_tokens)


@attrs.define
class SandboxConfig:
    """Limits of the Python tool's sandbox (see `sandbox.py` and docs/security.md for what is isolated).

    `timeout`: wall-clock seconds per run; `cpu_seconds`: CPU time (RLIMIT_CPU); `memory_mb`:
    address space per process (RLIMIT_AS); `max_processes`: processes and threads per run
    (RLIMIT_NPROC, counted in the run's own user namespace); `max_file_mb`: largest file it may
    write, its output included (RLIMIT_FSIZE); `max_open_files`: RLIMIT_NOFILE; `max_disk_mb`:
    size of its working directory (a tmpfs, the only writable place); `max_output_chars`: what
    the model is shown of stdout and stderr; `max_concurrent`: sandboxes running at once.

    `unsafe_local`: run code WITHOUT OS isolation (a guarded subprocess as the trainer's user,
    with its network and files) where isolation is unavailable. Off by default: without
    isolation the tool refuses to start. Only for trusted models.
    """

    timeout: float = attrs.field(default=10.0, validator=_sandbox_seconds)
    cpu_seconds: int = attrs.field(default=10, validator=_sandbox_seconds)
    memory_mb: int = attrs.field(default=1024, validator=number(ge=64, le=MAX_MB, why=MB_WHY))
    max_processes: int = attrs.field(default=16, validator=number(ge=1, le=4096, why="memory: each process of "
                                                                                         "the model's code"))
    max_file_mb: int = attrs.field(default=16, validator=number(ge=1, le=MAX_MB, why=MB_WHY))
    max_open_files: int = attrs.field(default=64, validator=number(ge=16, le=1 << 20, why="meaning: Linux caps open "
                                                                                             "files at 1,048,576"))
    max_disk_mb: int = attrs.field(default=64, validator=number(ge=1, le=MAX_MB, why=MB_WHY))
    max_output_chars: int = attrs.field(default=2000, validator=number(ge=64, le=MAX_CHARS, why=CHARS_WHY))
    max_concurrent: int = attrs.field(default=4, validator=number(ge=1, le=MAX_CONCURRENCY, why=CONCURRENCY_WHY))
    unsafe_local: bool = False


@attrs.define
class MathToolConfig:
    """Multi-turn: the model may run Python (a fenced ```` ```python ```` block or `<python>...</python>`).

    The episode ends at a reply with no code (the final answer), after `max_turns` model turns,
    or when the token budget is spent. `max_tool_calls` caps code runs per episode (later code
    gets a note instead of a run). Tool output comes back as a message with `observation_role`
    (`user` works with every chat template and OpenAI endpoint). `stop`: stop strings passed to
    the model when set (the in-process torch policy takes none; an OpenAI-compatible one does).
    """

    system_prompt: str = TOOL_SYSTEM_PROMPT
    use_task_prompt: bool = True
    max_turns: int = attrs.field(default=4, validator=number(ge=1, le=MAX_TURNS, why=TURNS_WHY))
    max_tool_calls: int = attrs.field(default=3, validator=number(ge=0, le=MAX_TURNS, why=TURNS_WHY))
    observation_role: str = "user"
    stop: list[str] | None = None
    temperature: float | None = attrs.field(default=None, validator=_temperature)
    top_p: float | None = attrs.field(default=None, validator=_top_p)
    max_tokens: int | None = attrs.field(default=None, validator=_tokens)
    sandbox: SandboxConfig = attrs.field(factory=SandboxConfig)


# --- judges -----------------------------------------------------------------------------------


@attrs.define
class MathAnswerConfig:
    """Rule-based answer check of the final answer (see `answers.py`, `equivalence.py`, `grading.py`).

    The final answer is the last `\\boxed{}`, else the last `####`, else what follows the last
    "answer is"/"answer:", else the whole reply when it is only a number or an expression.

    `correct_score` for a right answer; `format_score` for a wrong one in a marked format
    (`\\boxed{}`, `####`, "the answer is"; verl's GSM8K uses 0.1; default 0).
    `last_number`: when none of those is found, take the last number the text states: never an
    operand of an equation or expression (`5 + 3 =`), never one after "not" (for tiny models
    that never learned a format; it never earns `format_score`). `allow_expressions`: when the
    reference is a number, an arithmetic expression equal to it counts too (`0 + 3`,
    `\\sqrt{9}`, `6/2`); off by default, so restating the question never scores. Relations,
    lists and words never count. `truncated_score`: the score of a reply cut off by the token
    limit (its final turn's `finish_reason` is `length`, or the episode's token budget ran
    out), with the reason in `Reward.reason`; null grades such a reply like any other.
    `verify_timeout`: seconds math-verify may take per answer.
    """

    correct_score: float = attrs.field(default=1.0, validator=_score)
    format_score: float = attrs.field(default=0.0, validator=_score)
    last_number: bool = False
    allow_expressions: bool = False
    truncated_score: float | None = attrs.field(default=0.0, validator=_score)
    verify_timeout: float = attrs.field(default=15.0, validator=number(gt=0, le=MAX_SECONDS, why=SECONDS_WHY))


@attrs.define
class MathFormatConfig:
    """A format reward: `score` when the final model turn states an answer (`\\boxed{}` by default).

    `require_boxed`: only a `\\boxed{}` counts (else any final answer `math_answer` would find:
    `####`, "the answer is", a reply that is only a number).
    """

    score: float = attrs.field(default=1.0, validator=_score)
    require_boxed: bool = True
