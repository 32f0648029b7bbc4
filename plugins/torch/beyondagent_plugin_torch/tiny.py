"""The `tiny` model: a small Qwen2-architecture causal LM built locally, so everything runs offline.

Nothing is downloaded. The tokenizer is a byte-level BPE trained with `tokenizers` on a small
built-in corpus (grid-game instructions and observations, arithmetic, JSON); the weights are
random but seeded, so every build writes the same bytes. The model is built on first use into
`$BEYONDAGENT_CACHE/models/tiny-v<N>` (`~/.cache/beyondagent` by default) and reused after that.

The directory is an ordinary transformers checkpoint: load it with `AutoModelForCausalLM` and
`AutoTokenizer`, then set `padding_side="left"` (it is not saved); `models.load_policy("tiny", ...)`
does all of that.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import Qwen2ForCausalLM, Qwen2Tokenizer

# Bump when anything below changes what is built (corpus, vocab size, config, seed, file set):
# a new name means a new cache directory, so an old build is never mistaken for the new one.
# (The manifest's recipe fingerprint also catches an edit made without a bump: it is rebuilt.)
RECIPE_VERSION = 1
TINY_NAME = f"tiny-v{RECIPE_VERSION}"

VOCAB_SIZE = 1024
SEED = 1234
PAD_TOKEN = "<|endoftext|>"
IM_START = "<|im_start|>"
EOS_TOKEN = "<|im_end|>"
SPECIAL_TOKENS = (PAD_TOKEN, IM_START, EOS_TOKEN)

# ChatML with no default system prompt: what Qwen2-style chat checkpoints expect.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

MODEL_SHAPE = {
    "hidden_size": 128,
    "num_attention_heads": 2,  # head_dim 64: vLLM's CPU attention supports no smaller head
    "num_key_value_heads": 1,
    "head_dim": 64,
    "num_hidden_layers": 2,
    "intermediate_size": 256,
    "max_position_embeddings": 2048,
    "tie_word_embeddings": True,
}

MANIFEST = "beyondagent_tiny.json"
CHECKPOINT_FILES = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
)

# --- corpus ---------------------------------------------------------------------------------

_PROSE = """\
You are an agent playing a grid game. Read the observation and answer with one action.
Valid actions are left, right, up and down. Any other answer is an invalid action.
You are on a frozen lake. Walk from the start to the goal without falling into a hole.
The lake is slippery, so you may not always move in the direction you chose.
S is the start, F is frozen ice, H is a hole and G is the goal.
If you step into a hole the episode ends with a reward of 0. Reaching the goal gives a reward of 1.
You are a taxi driver in a 5 by 5 grid. Pick up the passenger and drop them off at the destination.
The actions are south, north, east, west, pickup and dropoff. Illegal pickup or dropoff costs 10 points.
Each step costs 1 point. A successful dropoff gives 20 points.
The locations are Red, Green, Yellow and Blue. The passenger is waiting at Red and wants to go to Blue.
You are walking along a cliff. Move from the start in the bottom left corner to the goal in the bottom right corner.
Stepping off the cliff costs 100 points and sends you back to the start. Every other step costs 1 point.
Observation: you are at row 3, column 2. The goal is at row 3, column 3.
Think step by step, then give your final answer.
Your answer must be a single word: left, right, up or down.
Respond in JSON with the key "action", for example {"action": "left"}.
That action is invalid. Please choose one of the valid actions.
The episode is over. You reached the goal in 6 steps.
Solve the problem and put the final answer at the end.
What is the sum of the numbers? What is the difference? What is the product?
The answer is a number. Show your work and check it again.
This is a new task. Please read the instructions carefully before you start.
The user asks a question and the assistant answers it. The assistant is helpful and brief.
I will move down first, then right, then down again until I reach the goal.
There is a hole to the right, so I should go down instead.
The wall is in the way, so the move has no effect and I stay in the same cell.
Hello! How can I help you today? Thank you, that is correct. Good job.
Yes, no, maybe. It is true that the first row is safe, but the second row has two holes.
The state is the number of the cell: row times the number of columns plus column.
Answer with one action only. Do not explain your answer. Do not repeat the question.
The agent learns from its own experience: it explores the environment, writes new tasks and trains on them.
A policy maps each observation to an action. The value of a state is the expected return from it.
We sample several answers for each task, score them with a reward function and compare them within the group.
Better answers get a positive advantage and worse answers get a negative advantage.
Your previous action moved you one cell to the left. You can see the whole map below.
The map has four rows and four columns. The first row is at the top and the first column is on the left.
The passenger is in the taxi. Drive to the destination and drop off the passenger.
The taxi is at row 2, column 1. The passenger is at Yellow. The destination is Green.
You have 100 steps left. The maximum number of steps is 100. The time is up.
Please write your reasoning inside <think> and </think>, then the answer inside <answer> and </answer>.
Here is an example of a good answer. Here is the history of your previous moves.
The weather is nice today, and the people in the small town are happy to see the sun again.
She said that they would come back next week, after the long holiday, if the road was open.
He could not find the key, so he looked under the table, behind the door and in every box.
It was a long day at work. We had a lot of things to do, but we did all of them well.
Please read the file, find the error and fix it. Then run the tests again and report the result.
The quick brown fox jumps over the lazy dog. A small cat sleeps in the warm light of the window.
Name the object, count the items, compare the values, and write the result as a list.
Good morning. Good evening. Good night. See you later. Have a nice day. You are welcome.
You are playing FrozenLake. You are playing Taxi. You are playing CliffWalking. You are playing Sokoban.
Which action do you take? Which way do you go? Reply with the action you take. Reply with one word.
Take a step. Take the passenger. Which cell is safe? Which move is best? Reply now.
system
user
assistant
"""

ACTIONS = ("left", "right", "up", "down")
TAXI_ACTIONS = ("south", "north", "east", "west", "pickup", "dropoff")
_TILES = "SFHG"
_FROZEN_LAKE_MAPS = (
    ("SFFF", "FHFH", "FFFH", "HFFG"),
    ("SFFFFFFF", "FFFFFFFF", "FFFHFFFF", "FFFFFHFF", "FFFHFFFF", "FHHFFFHF", "FHFFHFHF", "FFFHFFFG"),
)


def _grid_lines() -> Iterator[str]:
    for grid in _FROZEN_LAKE_MAPS:
        size = len(grid)
        yield "\n".join(grid)
        for row in range(size):
            for column in range(size):
                tile = grid[row][column]
                name = {"S": "start", "F": "frozen", "H": "hole", "G": "goal"}[tile]
                yield f"You are at row {row}, column {column}. The cell is {name} ({tile})."
                yield f"Current position: ({row}, {column}). State: {row * size + column}."
    for column in range(12):
        yield f"The cliff is at row 3, column {column}. Do not step on the cliff."


def _action_lines() -> Iterator[str]:
    for action in ACTIONS + TAXI_ACTIONS:
        capital = action.capitalize()
        yield f"Action: {action}\n{action}\nI choose {action}. Move {action}. {capital} is a valid action."
        yield f'{{"action": "{action}"}} ["{action}"] <action>{action}</action> {capital}. {action.upper()}'
        yield f"Moving {action} is invalid here, try another action. Invalid action: {action}."
        yield f"{capital}\n{action}\n{capital}\ninvalid\n{action}"
    for first in ACTIONS:
        for second in ACTIONS:
            yield f"I moved {first} and then {second}. Next: {second}, {first}. {first.capitalize()}, {second}."


def _arithmetic_lines() -> Iterator[str]:
    for a in range(0, 40, 3):
        for b in range(1, 30, 2):
            yield f"{a} + {b} = {a + b}. {a + b} - {b} = {a}. {a} * {b} = {a * b}."
            yield f"What is {a} + {b}? The answer is {a + b}."
    for n in range(0, 1001, 37):
        yield f"[{n}, {n + 1}, {n + 2}] {{\"value\": {n}, \"next\": {n + 1}}} {n / 4:.2f} {-n}"


def _chat_lines() -> Iterator[str]:
    for role in ("system", "user", "assistant"):
        yield f'{{"role": "{role}", "content": "Move left."}}'
    yield '{"task_id": "frozenlake-0", "query": "Reach the goal.", "reward": 1.0, "done": true, "ok": false}'
    yield "(a) [b] {c} <d> 'e' \"f\" a, b; c: d! e? f... g - h / i = j % k & l | m # n @ o $ p ^ q ~ r _ s"


def corpus() -> list[str]:
    """The built-in training text for the tiny tokenizer (deterministic: no randomness)."""
    lines = _PROSE.splitlines()
    for generate in (_grid_lines, _action_lines, _arithmetic_lines, _chat_lines):
        lines.extend(generate())
    return lines


# --- build ----------------------------------------------------------------------------------


def build_tokenizer() -> Qwen2Tokenizer:
    """Train the byte-level BPE and wrap it as a `Qwen2Tokenizer` (with the ChatML template)."""
    from tokenizers import Regex, Tokenizer, decoders, normalizers, pre_tokenizers, trainers
    from tokenizers.models import BPE
    from transformers import Qwen2Tokenizer
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

    # The trap: `AutoTokenizer` reloads this as `Qwen2Tokenizer`, which rebuilds the normalizer
    # and pre-tokenizer from its own recipe and keeps only vocab and merges from tokenizer.json.
    # Training with exactly that recipe (NFC, Qwen2's split regex, byte-level without its own
    # regex) makes the reloaded tokenizer split text the same way as the one trained here.
    trainer_tokenizer = Tokenizer(BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    trainer_tokenizer.normalizer = normalizers.NFC()
    trainer_tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    trainer_tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # every byte, so nothing is ever unknown
        show_progress=False,
    )
    trainer_tokenizer.train_from_iterator(corpus(), trainer)

    trained = json.loads(trainer_tokenizer.to_str())["model"]
    return Qwen2Tokenizer(
        vocab=trained["vocab"],
        merges=[tuple(merge) for merge in trained["merges"]],
        unk_token=None,
        bos_token=None,
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        extra_special_tokens=[IM_START],
        model_max_length=2048,
        chat_template=CHAT_TEMPLATE,
    )


def build_model(tokenizer: Qwen2Tokenizer) -> Qwen2ForCausalLM:
    """A randomly initialised Qwen2 causal LM sized for `tokenizer`; the same weights every time."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    eos_id = tokenizer.convert_tokens_to_ids(EOS_TOKEN)
    pad_id = tokenizer.convert_tokens_to_ids(PAD_TOKEN)
    config = Qwen2Config(
        **MODEL_SHAPE,
        vocab_size=len(tokenizer),
        bos_token_id=pad_id,  # as in Qwen2 checkpoints: no BOS is prepended, the id is <|endoftext|>
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        dtype="float32",
    )
    # A private RNG state: building must not disturb the caller's seeds, nor depend on them.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(bos_token_id=pad_id, eos_token_id=eos_id, pad_token_id=pad_id)
    return model.eval()


def build_into(directory: Path) -> None:
    """Write the complete tiny checkpoint (tokenizer, model, manifest) into `directory`."""
    from beyondagent_plugin_torch.models import quiet_progress_bars

    tokenizer = build_tokenizer()
    model = build_model(tokenizer)
    tokenizer.save_pretrained(directory)
    with quiet_progress_bars():
        model.save_pretrained(directory)
    _write_manifest(directory)


# --- cache ----------------------------------------------------------------------------------


def cache_root() -> Path:
    """`$BEYONDAGENT_CACHE`, or `~/.cache/beyondagent` when it is not set."""
    configured = os.environ.get("BEYONDAGENT_CACHE")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "beyondagent"


def tiny_model_dir(cache_dir: Path | None = None) -> Path:
    """The tiny checkpoint's directory, built on first use: `<cache>/models/tiny-v<N>`.

    `cache_dir` replaces `$BEYONDAGENT_CACHE` as the cache root. A complete directory is reused;
    a missing, half-written or altered one is (re)built in a temporary directory next to it and
    renamed into place, under a file lock so that concurrent processes build it once.
    """
    models_dir = (Path(cache_dir).expanduser() if cache_dir is not None else cache_root()) / "models"
    target = models_dir / TINY_NAME
    if is_complete(target):
        return target
    models_dir.mkdir(parents=True, exist_ok=True)
    with _exclusive_lock(models_dir / f".{TINY_NAME}.lock") as locked:
        if is_complete(target):  # another process built it while we waited for the lock
            return target
        if locked:  # without the lock, other processes' builds may be in progress
            _remove_leftovers(models_dir, target)
        staging = Path(tempfile.mkdtemp(prefix=f".{TINY_NAME}.build-", dir=models_dir))
        try:
            staging.chmod(0o755)  # mkdtemp makes it private; the finished model is an ordinary directory
            build_into(staging)
            _move_into_place(staging, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)  # nothing left there after a successful rename
    return target


def is_complete(directory: Path) -> bool:
    """Whether `directory` holds a finished build of this recipe whose files are unchanged."""
    try:
        manifest = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
        if manifest.get("recipe") != TINY_NAME or manifest.get("fingerprint") != recipe_fingerprint():
            return False
        if set(manifest.get("files", {})) != set(CHECKPOINT_FILES):
            return False
        return all(_sha256(directory / name) == digest for name, digest in manifest["files"].items())
    except (OSError, ValueError, AttributeError):
        return False


def _move_into_place(staging: Path, target: Path) -> None:
    try:
        os.replace(staging, target)
    except OSError:
        # Without a lock (no fcntl) another process may have renamed its build in first: use that one.
        if not is_complete(target):
            raise


def _write_manifest(directory: Path) -> None:
    missing = [name for name in CHECKPOINT_FILES if not (directory / name).is_file()]
    if missing:
        raise RuntimeError(f"tiny model build did not write {', '.join(missing)}; the transformers version "
                           f"may save checkpoints differently (bump RECIPE_VERSION when adapting)")
    files = {name: _sha256(directory / name) for name in CHECKPOINT_FILES}
    # Written last: a directory without it is an unfinished build.
    manifest = {"recipe": TINY_NAME, "fingerprint": recipe_fingerprint(), "files": files}
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


@functools.cache
def recipe_fingerprint() -> str:
    """A hash of the recipe's inputs, so an edit made without bumping RECIPE_VERSION still rebuilds."""
    recipe = {"corpus": corpus(), "vocab_size": VOCAB_SIZE, "seed": SEED, "special_tokens": SPECIAL_TOKENS,
              "chat_template": CHAT_TEMPLATE, "model_shape": MODEL_SHAPE}
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _remove_leftovers(models_dir: Path, target: Path) -> None:
    """Clear an incomplete target and staging directories of crashed builds (we hold the lock)."""
    for stale in models_dir.glob(f".{TINY_NAME}.build-*"):
        shutil.rmtree(stale, ignore_errors=True)
    if target.is_symlink() or target.is_file():
        target.unlink()
    elif target.exists():
        # Renamed aside first, so the target name is free even if deleting takes a while or fails.
        doomed = Path(tempfile.mkdtemp(prefix=f".{TINY_NAME}.build-", dir=models_dir))
        os.replace(target, doomed / "old")
        shutil.rmtree(doomed, ignore_errors=True)


@contextlib.contextmanager
def _exclusive_lock(path: Path) -> Iterator[bool]:
    """Hold an exclusive lock on `path`; yields whether a lock is actually held."""
    try:
        import fcntl
    except ImportError:  # not POSIX (Windows): builds still land atomically, just not serialised
        yield False
        return
    with open(path, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield True
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
