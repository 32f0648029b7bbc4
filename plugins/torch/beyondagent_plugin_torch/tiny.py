"""The `tiny` model: a small Qwen2-architecture causal LM built locally, so everything runs offline.

Nothing is downloaded. The tokenizer is a byte-level BPE trained with `tokenizers` on a small
built-in corpus (`tiny_corpus.py`: the text of the examples, docs and tests); the weights are
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

from beyondagent_plugin_torch.tiny_corpus import ACTIONS, TAXI_ACTIONS, corpus  # noqa: F401 - re-exported

if TYPE_CHECKING:
    from transformers import Qwen2ForCausalLM, Qwen2Tokenizer

# Bump when anything below changes what is built (corpus, vocab size, config, seed, file set):
# a new name means a new cache directory, so an old build is never mistaken for the new one.
# (The manifest's recipe fingerprint also catches an edit made without a bump: it is rebuilt.)
RECIPE_VERSION = 2
TINY_NAME = f"tiny-v{RECIPE_VERSION}"

VOCAB_SIZE = 2048
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
