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

import functools
import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

from beyondagent_plugin_torch.model_cache import build_once, cache_root, models_dir, read_manifest, write_manifest  # noqa: F401
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
    from beyondagent_plugin_torch.progress_bars import quiet_progress_bars

    tokenizer = build_tokenizer()
    model = build_model(tokenizer)
    tokenizer.save_pretrained(directory)
    with quiet_progress_bars():
        model.save_pretrained(directory)
    _write_manifest(directory)


# --- cache ----------------------------------------------------------------------------------


def tiny_model_dir(cache_dir: Path | None = None) -> Path:
    """The tiny checkpoint's directory, built on first use: `<cache>/models/tiny-v<N>`.

    `cache_dir` replaces `$BEYONDAGENT_CACHE` as the cache root. A complete directory is reused;
    a missing, half-written or altered one is (re)built (`model_cache.build_once`).
    """
    return build_once(models_dir(cache_dir) / TINY_NAME, build_into, is_complete)


def is_complete(directory: Path) -> bool:
    """Whether `directory` holds a finished build of this recipe whose files are unchanged."""
    manifest = read_manifest(directory, MANIFEST, verify="sha256")  # small files: every byte is checked
    return (manifest is not None and manifest.get("recipe") == TINY_NAME
            and manifest.get("fingerprint") == recipe_fingerprint()
            and set(manifest["files"]) == set(CHECKPOINT_FILES))


def _write_manifest(directory: Path) -> None:
    write_manifest(directory, MANIFEST, CHECKPOINT_FILES, recipe=TINY_NAME, fingerprint=recipe_fingerprint())


@functools.cache
def recipe_fingerprint() -> str:
    """A hash of the recipe's inputs, so an edit made without bumping RECIPE_VERSION still rebuilds."""
    recipe = {"corpus": corpus(), "vocab_size": VOCAB_SIZE, "seed": SEED, "special_tokens": SPECIAL_TOKENS,
              "chat_template": CHAT_TEMPLATE, "model_shape": MODEL_SHAPE}
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()
