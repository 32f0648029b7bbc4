"""A GGUF file as an ordinary transformers checkpoint directory, converted once and cached.

`model.path: /models/x.Q4_1.gguf` works like a checkpoint directory: transformers reads the GGUF
(`gguf_file=`; it needs the `gguf` package) and dequantizes it to float32, but refuses to
`save_pretrained` a model loaded that way. So the model is rebuilt from its config without the
GGUF quantization entry, every weight copied over (strict: every key must match), and saved
as safetensors with the GGUF's tokenizer and chat template. The result lives in
`<cache>/models/gguf-<sha256 prefix>`: keyed by the file's content, so a second start only
hashes the file (~0.3 s per 100 MB) and a changed file is converted again.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

from beyondagent_core.errors import BeyondAgentError
from beyondagent_plugin_torch.model_cache import build_once, models_dir, read_manifest, sha256_file, write_manifest

# Bump when the conversion changes what it writes: older conversions are then redone.
CONVERTER_VERSION = 1
MANIFEST = "beyondagent_model.json"
CHECKPOINT_FILES = ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                    "tokenizer_config.json")


class ModelConversionError(BeyondAgentError):
    """A GGUF file could not be turned into a transformers checkpoint."""


def gguf_checkpoint_dir(gguf: Path, *, cache_dir: Path | None = None) -> Path:
    """The converted checkpoint of `gguf` (converted now when it is not cached yet)."""
    gguf = Path(gguf).expanduser()
    digest = sha256_file(gguf)
    target = models_dir(cache_dir) / f"gguf-{digest[:16]}"
    return build_once(target, lambda staging: convert_gguf(gguf, staging, source_sha256=digest),
                      lambda directory: is_converted(directory, digest))


def is_converted(directory: Path, source_sha256: str) -> bool:
    """Whether `directory` holds a finished conversion of the GGUF with this hash, files unchanged."""
    manifest = read_manifest(directory, MANIFEST)
    return (manifest is not None and manifest.get("source_sha256") == source_sha256
            and manifest.get("converter") == CONVERTER_VERSION)


def convert_gguf(gguf: Path, directory: Path, *, source_sha256: str, **facts: object) -> None:
    """Write the transformers checkpoint of `gguf` into `directory` (fp32 safetensors, tokenizer, manifest).

    `facts` go into the manifest (where the file came from).
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from beyondagent_plugin_torch.progress_bars import quiet_progress_bars

    _require_gguf_reader(gguf)
    try:
        # transformers draws its own tqdm bar while dequantizing, past its progress-bar switch
        with quiet_progress_bars(), contextlib.redirect_stderr(io.StringIO()):
            tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
            loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    except Exception as error:  # noqa: BLE001 - an untrusted file: transformers' reader fails in many ways
        raise ModelConversionError(
            f"transformers could not read {gguf} as a GGUF model: {_first_line(error)}", where=str(gguf),
            hint="the architecture must be one transformers reads from GGUF (llama, qwen2, mistral, ...); "
                 "or convert it yourself and set model.path to the checkpoint directory") from None
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the saved model is plain float32, not a GGUF-quantized one
    config.name_or_path = ""
    with torch.device("meta"):
        rebuilt = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    rebuilt.load_state_dict(loaded.state_dict(), strict=True, assign=True)
    rebuilt.tie_weights()
    rebuilt.generation_config = loaded.generation_config
    with quiet_progress_bars():
        rebuilt.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    files = [*CHECKPOINT_FILES, *(["chat_template.jinja"] if (directory / "chat_template.jinja").is_file() else [])]
    write_manifest(directory, MANIFEST, files, source_sha256=source_sha256, converter=CONVERTER_VERSION,
                   source_file=gguf.name, **facts)


def _require_gguf_reader(gguf: Path) -> None:
    import importlib.util

    if importlib.util.find_spec("gguf") is None:
        raise ModelConversionError(f"reading {gguf.name} needs the `gguf` package, which is not installed",
                                   where=str(gguf), hint="pip install gguf (beyondagent-plugin-torch depends on it: "
                                                         "reinstall the plugin)")


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
