"""Tests of device/dtype resolution and policy loading, with the tiny model and real broken checkpoints."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
import torch
from beyondagent_plugin_torch import tiny
from beyondagent_plugin_torch.models import (
    load_policy,
    load_tokenizer,
    locate_checkpoint,
    resolve_attention,
    resolve_device,
    resolve_dtype,
)

from beyondagent_core.errors import SpecError

no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")


@pytest.fixture(autouse=True)
def offline_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("BEYONDAGENT_CACHE", str(tmp_path_factory.getbasetemp() / "models-cache"))


@pytest.fixture
def tiny_copy(tmp_path: Path) -> Path:
    """A private copy of the tiny checkpoint to break."""
    return Path(shutil.copytree(tiny.tiny_model_dir(), tmp_path / "checkpoint"))


# --- devices and dtypes ---------------------------------------------------------------------


def test_cpu_and_auto_devices() -> None:
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto") == torch.device("cuda" if torch.cuda.is_available() else "cpu")


@no_cuda
@pytest.mark.parametrize("name", ["cuda", "cuda:0", "cuda:3"])
def test_cuda_without_cuda_is_a_spec_error(name: str) -> None:
    with pytest.raises(SpecError) as caught:
        resolve_device(name, where="backend.device")
    assert "CUDA requested" in caught.value.message and "not available" in caught.value.message
    assert caught.value.where == "backend.device"
    assert "device: cpu" in caught.value.hint and "CUDA build of torch" in caught.value.hint


@pytest.mark.parametrize("name", ["gpu", "mps", "cuda:x", "", "meta"])
def test_unknown_devices_are_spec_errors(name: str) -> None:
    with pytest.raises(SpecError) as caught:
        resolve_device(name, where="trainer.device")
    assert "auto, cpu, cuda, cuda:N" in caught.value.message
    assert caught.value.where == "trainer.device"


def test_dtypes_by_name() -> None:
    cpu = torch.device("cpu")
    assert resolve_dtype("auto", cpu) == torch.float32
    assert resolve_dtype("float32", cpu) == torch.float32
    assert resolve_dtype("bfloat16", cpu) == torch.bfloat16
    assert resolve_dtype("float16", cpu) == torch.float16


def test_attention_is_sdpa_on_the_cpu_and_flash_attention_is_refused_with_the_reason(monkeypatch) -> None:
    import importlib.util

    cpu = torch.device("cpu")
    assert resolve_attention("auto", cpu, torch.float32) == "sdpa"
    assert resolve_attention("eager", cpu, torch.float32) == "eager"
    with pytest.raises(SpecError, match="CUDA GPUs only") as error:
        resolve_attention("flash_attention_2", cpu, torch.bfloat16, where="spec.yaml, key backend.attn_implementation")
    assert error.value.where == "spec.yaml, key backend.attn_implementation"
    with pytest.raises(SpecError, match="unknown attention implementation 'flash'"):
        resolve_attention("flash", cpu, torch.float32)
    # On a GPU: flash-attn missing, or float32 weights, say what to do.
    cuda = torch.device("cuda")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    assert resolve_attention("auto", cuda, torch.bfloat16) == "sdpa"
    with pytest.raises(SpecError, match="flash-attn package is not installed") as error:
        resolve_attention("flash_attention_2", cuda, torch.bfloat16)
    assert "[gpu]" in error.value.hint
    with pytest.raises(SpecError, match="needs bfloat16 or float16"):
        resolve_attention("flash_attention_2", cuda, torch.float32)


def test_eager_and_sdpa_attention_compute_the_same_logits() -> None:
    ids = torch.tensor([[5, 17, 42, 7, 99]])
    logits = {}
    for kernel in ("eager", "sdpa"):
        model, _ = load_policy("tiny", attention=kernel)
        assert model.config._attn_implementation == kernel
        with torch.no_grad():
            logits[kernel] = model(input_ids=ids).logits
    assert torch.allclose(logits["eager"], logits["sdpa"], atol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_auto_dtype_on_cuda_prefers_bfloat16() -> None:
    expected = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float32
    assert resolve_dtype("auto", torch.device("cuda")) == expected


@pytest.mark.parametrize("name", ["fp32", "float64", "half", "Float32"])
def test_unknown_dtypes_are_spec_errors_listing_the_valid_ones(name: str) -> None:
    with pytest.raises(SpecError) as caught:
        resolve_dtype(name, torch.device("cpu"))
    assert caught.value.message == f"unknown dtype {name!r}; valid: auto, float32, bfloat16, float16"
    assert caught.value.where == "backend.dtype"


# --- loading the policy ---------------------------------------------------------------------


def test_load_tiny_policy() -> None:
    model, tokenizer = load_policy("tiny", tokenizer=None, device=torch.device("cpu"), dtype=torch.float32)
    assert type(model).__name__ == "Qwen2ForCausalLM"
    assert not model.training
    assert model.device == torch.device("cpu") and model.dtype == torch.float32
    assert tokenizer.padding_side == "left"
    assert tokenizer.pad_token == "<|endoftext|>" and tokenizer.eos_token == "<|im_end|>"
    assert tokenizer.chat_template

    batch = tokenizer(["left", "a much longer prompt"], return_tensors="pt", padding=True)
    assert batch["input_ids"][0, 0] == tokenizer.pad_token_id  # left padded
    assert batch["input_ids"][0, -1] != tokenizer.pad_token_id
    with torch.no_grad():
        generated = model.generate(**batch, max_new_tokens=4, do_sample=False)
    assert generated.shape[0] == 2


def test_load_policy_resolves_names_and_dtype() -> None:
    model, _ = load_policy("tiny", device="cpu", dtype="bfloat16")
    assert model.dtype == torch.bfloat16
    assert torch.isfinite(model(torch.tensor([[1, 2, 3]])).logits.float()).all()


def test_load_policy_from_a_local_directory_and_a_separate_tokenizer(tiny_copy: Path) -> None:
    model, tokenizer = load_policy(str(tiny_copy), tokenizer="tiny", device="cpu", dtype="float32")
    assert model.config.vocab_size == len(tokenizer)
    assert tokenizer.padding_side == "left"


def test_load_tokenizer_alone() -> None:
    tokenizer = load_tokenizer("tiny")
    assert tokenizer.padding_side == "left"
    assert tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False,
                                         add_generation_prompt=True).endswith("<|im_start|>assistant\n")


@pytest.mark.parametrize("path", ["does/not/exist", "./missing-checkpoint", "/no/such/dir", "~/no-such-model"])
def test_a_missing_path_is_a_spec_error_naming_model_path(path: str) -> None:
    with pytest.raises(SpecError) as caught:
        load_policy(path, device="cpu", dtype="float32")
    assert caught.value.message == f"model path {path!r} does not exist"
    assert caught.value.where == "model.path"
    assert "local checkpoint directory" in caught.value.hint and "`tiny`" in caught.value.hint


def test_an_uncached_hub_id_offline_fails_fast_with_a_one_line_reason() -> None:
    started = time.monotonic()
    with pytest.raises(SpecError) as caught:
        load_policy("nobody-here/no-such-model", device="cpu", dtype="float32", where="explore.model.path")
    assert time.monotonic() - started < 30
    assert caught.value.message.startswith("model path 'nobody-here/no-such-model' does not exist")
    assert "\n" not in caught.value.message
    assert caught.value.where == "explore.model.path"
    assert locate_checkpoint("nobody-here/no-such-model") == ("nobody-here/no-such-model", True)


def test_a_file_is_not_a_checkpoint(tmp_path: Path) -> None:
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"")
    with pytest.raises(SpecError, match="is a file, not a checkpoint directory") as caught:
        load_policy(str(weights), device="cpu", dtype="float32")
    assert caught.value.where == "model.path"


def test_an_empty_directory_is_a_one_line_spec_error(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as caught:
        load_policy(str(tmp_path), device="cpu", dtype="float32")
    assert caught.value.message.startswith(f"could not load the tokenizer at {str(tmp_path)!r}: ")
    assert "\n" not in caught.value.message
    assert caught.value.where == "model.path"
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_a_checkpoint_without_weights_is_a_spec_error(tiny_copy: Path) -> None:
    (tiny_copy / "model.safetensors").unlink()
    with pytest.raises(SpecError) as caught:
        load_policy(str(tiny_copy), device="cpu", dtype="float32")
    assert caught.value.message.startswith(f"could not load the model at {str(tiny_copy)!r}: ")
    assert "\n" not in caught.value.message


@pytest.mark.parametrize(("where", "tokenizer_where"), [
    ("model.path", "model.tokenizer"),
    ("spec.yaml, key model.path", "spec.yaml, key model.tokenizer"),
    ("checkpoint runs/a.b/model", "checkpoint runs/a.b/model (tokenizer)"),
])
def test_a_missing_separate_tokenizer_names_its_key(where: str, tokenizer_where: str) -> None:
    with pytest.raises(SpecError) as caught:
        load_policy("tiny", tokenizer="./no-tokenizer-here", device="cpu", dtype="float32", where=where)
    assert caught.value.message == "tokenizer path './no-tokenizer-here' does not exist"
    assert caught.value.where == tokenizer_where
    assert "model.tokenizer" in caught.value.hint


def test_a_tokenizer_without_chat_template_is_a_spec_error(tiny_copy: Path) -> None:
    (tiny_copy / "chat_template.jinja").unlink()
    config = json.loads((tiny_copy / "tokenizer_config.json").read_text())
    assert "chat_template" not in config  # the template lives only in chat_template.jinja
    with pytest.raises(SpecError) as caught:
        load_tokenizer(str(tiny_copy))
    assert caught.value.message == f"the tokenizer at {str(tiny_copy)!r} has no chat template"
    assert "model.tokenizer" in caught.value.hint

    model, tokenizer = load_policy(str(tiny_copy), tokenizer="tiny", device="cpu", dtype="float32")
    assert tokenizer.chat_template


def test_a_tokenizer_without_pad_token_pads_with_eos(tiny_copy: Path) -> None:
    config_path = tiny_copy / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config_path.write_text(json.dumps({**config, "pad_token": None}))
    tokenizer = load_tokenizer(str(tiny_copy))
    assert tokenizer.pad_token == tokenizer.eos_token == "<|im_end|>"
