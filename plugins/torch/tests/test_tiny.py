"""Tests of the tiny model: deterministic offline build, tokenizer traps, chat template, the cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from beyondagent_plugin_torch import tiny
from tiny_and_real import loaded_policy
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen2Tokenizer

SAMPLES = [
    "",
    "left",
    "Move left, right, up or down.",
    "You are at row 3, column 2. Action: down",
    "SFFF\nFHFH\nFFFH\nHFFG",
    "12 + 7 = 19. 1234567890 * -3.14 = ?",
    '{"action": "left", "reward": 1.0, "done": true}',
    "  leading spaces,\ttabs\t and trailing   \n\n\r\n",
    "It's what we'd've done; they'll see I'm right.",
    "Ünïcödé: café, naïve, Straße, ÅNGSTRÖM, e\u0301 (combining accent)",
    "中文测试：向左走，然后向下。你好，世界！",
    "日本語のテキストと한국어 텍스트",
    "emoji 🚀🧊🕳️ and math ∑ x² ≤ ∞",
    "<|im_start|>user\nGo left<|im_end|>\n<|im_start|>assistant\n",
    "left<|endoftext|>right",
    "<think>go down</think><answer>down</answer>",
]


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("BEYONDAGENT_CACHE", str(root))
    return root


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny.tiny_model_dir(tmp_path_factory.mktemp("tiny-cache"))


@pytest.fixture(scope="module")
def tokenizer(tiny_dir: Path) -> Qwen2Tokenizer:
    return AutoTokenizer.from_pretrained(tiny_dir, local_files_only=True)


def file_bytes(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir())}


# --- build ----------------------------------------------------------------------------------


def test_build_writes_a_complete_checkpoint_under_the_cache(cache: Path) -> None:
    directory = tiny.tiny_model_dir()
    assert directory == cache / "models" / tiny.TINY_NAME
    assert {p.name for p in directory.iterdir()} == {*tiny.CHECKPOINT_FILES, tiny.MANIFEST}
    assert tiny.is_complete(directory)
    assert sorted(p.name for p in directory.parent.iterdir()) == [f".{tiny.TINY_NAME}.lock", tiny.TINY_NAME]


def test_default_cache_is_under_the_home_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BEYONDAGENT_CACHE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert tiny.cache_root() == tmp_path / ".cache" / "beyondagent"
    assert tiny.tiny_model_dir() == tmp_path / ".cache" / "beyondagent" / "models" / tiny.TINY_NAME


def test_two_builds_write_identical_files(tmp_path: Path) -> None:
    first = tiny.tiny_model_dir(tmp_path / "one")
    second = tiny.tiny_model_dir(tmp_path / "two")
    assert file_bytes(first) == file_bytes(second)


def test_the_build_is_small(tmp_path: Path) -> None:
    """What makes the build cheap, without a clock: a model of well under a million parameters and a
    few MB of files (its speed is `benchmarks/`' business, not a test's)."""
    directory = tiny.tiny_model_dir(tmp_path / "small")
    assert sum(path.stat().st_size for path in directory.iterdir() if path.is_file()) < 4_000_000
    model, _ = loaded_policy("tiny")
    assert sum(parameter.numel() for parameter in model.parameters()) < 1_000_000


def test_build_leaves_the_global_rng_alone(tmp_path: Path) -> None:
    torch.manual_seed(7)
    expected = torch.rand(4)
    torch.manual_seed(7)
    tiny.tiny_model_dir(tmp_path)
    assert torch.equal(torch.rand(4), expected)


def test_build_and_load_need_no_network(tmp_path: Path) -> None:
    script = textwrap.dedent("""
        import socket

        def refuse(*args, **kwargs):
            raise OSError("network use in an offline test")

        socket.socket.connect = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse

        from beyondagent_plugin_torch.models import load_policy
        model, tokenizer = load_policy("tiny", device="cpu", dtype="float32")
        print(type(model).__name__, type(tokenizer).__name__)
    """)
    env = {**os.environ, "BEYONDAGENT_CACHE": str(tmp_path)}
    env.pop("HF_HUB_OFFLINE")  # no offline flag: nothing may even try the hub
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["Qwen2ForCausalLM", "Qwen2Tokenizer"]


# --- cache ----------------------------------------------------------------------------------


def test_a_complete_directory_is_reused(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    directory = tiny.tiny_model_dir()
    before = {name: (directory / name).stat().st_mtime_ns for name in tiny.CHECKPOINT_FILES}

    def must_not_build(directory: Path) -> None:
        raise AssertionError("rebuilt a complete directory")

    monkeypatch.setattr(tiny, "build_into", must_not_build)
    assert tiny.tiny_model_dir() == directory
    assert {name: (directory / name).stat().st_mtime_ns for name in tiny.CHECKPOINT_FILES} == before


@pytest.mark.parametrize("damage", ["delete weights", "truncate weights", "delete manifest", "edit config"])
def test_a_damaged_directory_is_rebuilt(cache: Path, damage: str) -> None:
    directory = tiny.tiny_model_dir()
    good = file_bytes(directory)
    if damage == "delete weights":
        (directory / "model.safetensors").unlink()
    elif damage == "truncate weights":
        (directory / "model.safetensors").write_bytes(good["model.safetensors"][:1000])
    elif damage == "delete manifest":
        (directory / tiny.MANIFEST).unlink()
    else:
        (directory / "config.json").write_text("{}")
    assert not tiny.is_complete(directory)

    assert tiny.tiny_model_dir() == directory
    assert file_bytes(directory) == good


def test_a_half_built_directory_and_stale_staging_are_replaced(cache: Path) -> None:
    models = cache / "models"
    (models / tiny.TINY_NAME).mkdir(parents=True)
    (models / tiny.TINY_NAME / "config.json").write_text("{}")
    (models / f".{tiny.TINY_NAME}.build-crashed").mkdir()
    (models / f".{tiny.TINY_NAME}.build-crashed" / "tokenizer.json").write_text("{")

    directory = tiny.tiny_model_dir()
    assert tiny.is_complete(directory)
    assert sorted(p.name for p in models.iterdir()) == [f".{tiny.TINY_NAME}.lock", tiny.TINY_NAME]


@pytest.mark.parametrize("key", ["recipe", "fingerprint"])
def test_a_directory_from_another_recipe_is_rebuilt(cache: Path, key: str) -> None:
    directory = tiny.tiny_model_dir()
    manifest = json.loads((directory / tiny.MANIFEST).read_text())
    (directory / tiny.MANIFEST).write_text(json.dumps({**manifest, key: "an older recipe"}))
    assert not tiny.is_complete(directory)
    assert tiny.is_complete(tiny.tiny_model_dir())


CONCURRENT_BUILDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path

    import transformers  # noqa: F401  (imported before the start signal so both builds start together)
    from beyondagent_plugin_torch import tiny

    build_into = tiny.build_into

    def counted_build(directory):
        print("BUILT", flush=True)
        build_into(directory)

    tiny.build_into = counted_build
    cache, ready, go = map(Path, sys.argv[1:])
    ready.touch()
    while not go.exists():
        time.sleep(0.005)
    print(tiny.tiny_model_dir(cache), flush=True)
""")


def test_concurrent_builds_end_with_one_valid_directory(tmp_path: Path) -> None:
    cache, go = tmp_path / "cache", tmp_path / "go"
    ready = [tmp_path / f"ready-{i}" for i in range(2)]
    builders = [
        subprocess.Popen([sys.executable, "-c", CONCURRENT_BUILDER, str(cache), str(flag), str(go)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for flag in ready
    ]
    deadline = time.monotonic() + 300
    while not all(flag.exists() for flag in ready) and time.monotonic() < deadline:
        time.sleep(0.01)
    go.touch()
    outputs = [builder.communicate(timeout=300) for builder in builders]

    assert [builder.returncode for builder in builders] == [0, 0], [err for _, err in outputs]
    lines = [line for out, _ in outputs for line in out.splitlines()]
    assert lines.count("BUILT") == 1  # the lock: the second process found the first one's build
    expected = cache / "models" / tiny.TINY_NAME
    assert sorted(line for line in lines if line != "BUILT") == [str(expected)] * 2
    assert tiny.is_complete(expected)
    assert sorted(p.name for p in expected.parent.iterdir()) == [f".{tiny.TINY_NAME}.lock", tiny.TINY_NAME]


# --- tokenizer ------------------------------------------------------------------------------


def test_reload_through_auto_tokenizer_splits_text_as_trained(tiny_dir: Path, tokenizer: Qwen2Tokenizer) -> None:
    # The trap: AutoTokenizer rebuilds Qwen2's own pre-tokenizer; tokenizer.json holds the trained one.
    assert type(tokenizer) is Qwen2Tokenizer
    trained = Tokenizer.from_file(str(tiny_dir / "tokenizer.json"))
    for text in SAMPLES:
        assert tokenizer(text)["input_ids"] == trained.encode(text).ids, text
    assert json.loads(tokenizer.backend_tokenizer.to_str())["pre_tokenizer"] == \
        json.loads(trained.to_str())["pre_tokenizer"]


def test_in_memory_and_reloaded_tokenizers_agree(tokenizer: Qwen2Tokenizer) -> None:
    built = tiny.build_tokenizer()
    assert len(built) == len(tokenizer)
    for text in SAMPLES:
        assert built(text)["input_ids"] == tokenizer(text)["input_ids"], text


def test_text_round_trips(tokenizer: Qwen2Tokenizer) -> None:
    for text in SAMPLES:
        assert tokenizer.decode(tokenizer(text)["input_ids"]) == text.replace("e\u0301", "\u00e9")  # NFC


def test_vocab_size_and_special_tokens(tokenizer: Qwen2Tokenizer) -> None:
    assert 512 <= len(tokenizer) <= tiny.VOCAB_SIZE
    assert tokenizer.pad_token == "<|endoftext|>"
    assert tokenizer.eos_token == "<|im_end|>"
    assert tokenizer.bos_token is None
    assert tokenizer.convert_tokens_to_ids(["<|endoftext|>", "<|im_start|>", "<|im_end|>"]) == [0, 1, 2]
    assert tokenizer("<|im_start|>user<|im_end|>")["input_ids"][::2] == [1, 2]
    assert tokenizer("go left")["input_ids"] == tokenizer.encode("go left", add_special_tokens=False)


@pytest.mark.parametrize("word", [*tiny.ACTIONS, *tiny.TAXI_ACTIONS])
def test_action_words_are_single_tokens(tokenizer: Qwen2Tokenizer, word: str) -> None:
    for form in (word, f" {word}", word.capitalize(), f" {word.capitalize()}"):
        assert len(tokenizer.encode(form)) == 1, form


def test_digits_and_chat_words_are_single_tokens(tokenizer: Qwen2Tokenizer) -> None:
    for text in [*"0123456789", "system", "user", "assistant", " action", " invalid", " goal", " hole"]:
        assert len(tokenizer.encode(text)) == 1, text
    assert len(tokenizer.encode("2048")) == 4  # Qwen2 splits numbers into single digits


def test_chat_template_renders_chatml(tokenizer: Qwen2Tokenizer) -> None:
    messages = [
        {"role": "system", "content": "Play FrozenLake."},
        {"role": "user", "content": "You are at row 0, column 0."},
        {"role": "assistant", "content": "down"},
        {"role": "user", "content": "Again."},
    ]
    rendered = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert rendered == (
        "<|im_start|>system\nPlay FrozenLake.<|im_end|>\n"
        "<|im_start|>user\nYou are at row 0, column 0.<|im_end|>\n"
        "<|im_start|>assistant\ndown<|im_end|>\n"
        "<|im_start|>user\nAgain.<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    user_only = [{"role": "user", "content": "hi"}]  # no default system prompt
    assert tokenizer.apply_chat_template(user_only, tokenize=False) == "<|im_start|>user\nhi<|im_end|>\n"
    ids = tokenizer.apply_chat_template(user_only, add_generation_prompt=True)["input_ids"]
    assert ids == tokenizer("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")["input_ids"]


def test_padding_side_is_not_saved(tokenizer: Qwen2Tokenizer) -> None:
    # Why load_tokenizer sets it on every load.
    assert tokenizer.padding_side == "right"


# --- model ----------------------------------------------------------------------------------


def test_model_config(tiny_dir: Path, tokenizer: Qwen2Tokenizer) -> None:
    model = AutoModelForCausalLM.from_pretrained(tiny_dir, local_files_only=True)
    config = model.config
    assert config.model_type == "qwen2"
    assert config.vocab_size == len(tokenizer)
    assert (config.hidden_size, config.num_attention_heads, config.num_key_value_heads) == (128, 2, 1)
    assert config.head_dim == 64
    assert (config.num_hidden_layers, config.intermediate_size, config.max_position_embeddings) == (2, 256, 2048)
    assert config.tie_word_embeddings
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    assert config.eos_token_id == model.generation_config.eos_token_id == tokenizer.eos_token_id
    assert config.pad_token_id == model.generation_config.pad_token_id == tokenizer.pad_token_id
    assert model.dtype == torch.float32


def test_model_forward_gives_finite_logits_and_generates(tiny_dir: Path, tokenizer: Qwen2Tokenizer) -> None:
    model = AutoModelForCausalLM.from_pretrained(tiny_dir, local_files_only=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny_dir, local_files_only=True, padding_side="left")
    prompts = [tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                             add_generation_prompt=True)
               for text in ("Go left.", "You are at row 3, column 2. Which action?")]
    batch = tokenizer(prompts, return_tensors="pt", padding=True)
    with torch.no_grad():
        logits = model(**batch).logits
    assert logits.shape == (2, batch["input_ids"].shape[1], len(tokenizer))
    assert torch.isfinite(logits).all()

    torch.manual_seed(0)
    generated = model.generate(**batch, max_new_tokens=8, do_sample=True)
    assert generated.shape[0] == 2 and 0 < generated.shape[1] - batch["input_ids"].shape[1] <= 8
    assert torch.equal(generated[:, : batch["input_ids"].shape[1]], batch["input_ids"])
    assert all(isinstance(text, str) for text in tokenizer.batch_decode(generated, skip_special_tokens=True))


# What the examples, the docs' walk-throughs and the tests ask the tiny model to read: each must
# get real codes from the tokenizer, not fall apart into bytes (a text of bytes is ~1 char a token).
COVERED = {
    "text adventure": "> open door\nYou open the door. > take key\nYou take the key. > go north",
    "guessing game": "Guess a number between 1 and 100. Your guess 50 is too high. Try a lower number.",
    "word problem": "Mia has 12 apples. She gives 5 to her brother. How many apples does she have now? "
                    "The final answer is \\boxed{7}. #### 7",
    "app code": '```python\ntoken = apis.spotify.login(username=email, password=passwords["spotify"])'
                '["access_token"]\nprint(apis.api_docs.show_api_descriptions(app_name="venmo"))\n```',
    "step judgment": "Step 1: ACTION: open door OBSERVATION: ok. Was this step GOOD or BAD? GOOD",
    "grid game": "You are at row 1, column 0. Which action do you take? Answer with left, right, up or down.",
}


@pytest.mark.parametrize("kind", sorted(COVERED))
def test_the_corpus_covers_the_examples_text(tokenizer: Qwen2Tokenizer, kind: str) -> None:
    text = COVERED[kind]
    tokens = len(tokenizer.encode(text, add_special_tokens=False))
    assert len(text) / tokens >= 2.5, f"{kind}: {tokens} tokens for {len(text)} characters"


def test_common_commands_are_a_token_a_word(tokenizer: Qwen2Tokenizer) -> None:
    for command in ("open door", "take key", "go north", "Action: down"):
        assert len(tokenizer.encode(command, add_special_tokens=False)) <= len(command.split()) + 1, command
