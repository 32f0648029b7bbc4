"""Cached virtualenvs for plugins whose stack cannot share the main environment.

verl pins `transformers<5.11`, AppWorld pins pydantic 1: a plugin that needs such a stack
describes a `VenvRecipe` (pip steps in order, the BeyondAgent distributions it needs, commands
to run afterwards, a check that prints what the venv has) and the core builds it once and
reuses it:

    venv = ensure_venv(recipe)                # built under a lock on first use, then cached
    subprocess.run([str(venv.python), "-m", "beyondagent_plugin_verl.launcher", ...], env=venv.environ())

A venv lives in `venv_root()/<name>-<key>` where `key` hashes the recipe, the interpreter
version and how each BeyondAgent distribution is installed here (a checkout installed editable
is installed editable there too, so code changes need no rebuild; its `pyproject.toml` is part
of the key, so dependency changes do). A venv is ready when its marker file exists; the marker
is written last, so an interrupted build is rebuilt from scratch. Every step's output goes to
`build.log` inside the venv, and a failed step raises `VenvBuildError` with the step, the tail
of its output and what to do (offline: which index could not be reached).

Plugins register recipes through the `beyondagent_venvs` hook (`VenvSpec`), which makes them
visible to `beyondagent venv list|build|path`.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from beyondagent_core.errors import BeyondAgentError, RunError

if TYPE_CHECKING:
    from beyondagent_core.registry import Registry

MARKER = "beyondagent-venv.json"
BUILD_LOG = "build.log"
ROOT_VAR = "BEYONDAGENT_VENVS"
# Variables that would leak this interpreter's packages into the venv's python.
LEAKY_VARS = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "VIRTUAL_ENV", "__PYVENV_LAUNCHER__")
OFFLINE_SIGNS = ("No matching distribution found", "Could not find a version", "NewConnectionError",
                 "Temporary failure in name resolution", "Network is unreachable", "Max retries exceeded",
                 "ConnectTimeoutError", "ReadTimeoutError", "Failed to establish a new connection")


class VenvBuildError(BeyondAgentError):
    """A plugin's venv could not be built (a pip step or a setup command failed)."""

    exit_code = 1


@attrs.frozen
class VenvRecipe:
    """How to build a venv, in order: `steps`, `local`, `uninstall`, `after`, then `check`.

    - `steps`: `pip install` argument lists, one pip call each (order matters: the CPU
      `torch==2.13.0` before a package whose plain `torch` requirement would pull CUDA wheels);
    - `local`: BeyondAgent distributions installed the way they are installed here (an editable
      checkout editable, a local path from that path, else `name==version` from the index);
    - `uninstall`: distributions removed afterwards (`pip uninstall -y`), e.g. CUDA-linked extras;
    - `after`: commands run afterwards with the venv's `bin/` first on PATH (`("appworld", "install")`);
    - `check`: Python source run with the venv's python; it must exit 0, and what it prints
      (versions, say) is kept in the marker and shown by `beyondagent venv list`.
    """

    name: str
    steps: tuple[tuple[str, ...], ...] = attrs.field(converter=lambda v: tuple(tuple(s) for s in v))
    local: tuple[str, ...] = attrs.field(default=("beyondagent",), converter=tuple)
    uninstall: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    after: tuple[tuple[str, ...], ...] = attrs.field(default=(), converter=lambda v: tuple(tuple(s) for s in v))
    check: str = ""
    python: str | None = None  # the interpreter to create it with (default: this one)

    def fingerprint(self) -> dict[str, Any]:
        """What decides the venv's content: the recipe, the interpreter, the local installs."""
        return {
            "recipe": attrs.asdict(self, filter=lambda a, _: a.name != "python"),
            "python": _python_version(self.python),
            "machine": platform.machine(),
            "local": [_local_source(name) for name in self.local],
        }

    def key(self) -> str:
        blob = json.dumps(self.fingerprint(), sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:12]


@attrs.frozen
class Venv:
    """A venv of a recipe at `path` (ready or not: see `ready`)."""

    recipe: VenvRecipe
    path: Path

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    @property
    def bin(self) -> Path:
        return self.path / "bin"

    @property
    def ready(self) -> bool:
        return (self.path / MARKER).is_file() and self.python.exists()

    @property
    def log_path(self) -> Path:
        return self.path / BUILD_LOG

    def info(self) -> dict[str, Any]:
        """The marker: when and how long it was built, and what its check printed."""
        try:
            return json.loads((self.path / MARKER).read_text())
        except (OSError, ValueError):
            return {}

    def environ(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """This process's environment for a child in the venv (`venv_environ`)."""
        return venv_environ(self.path, extra)

    def run(self, args: Sequence[str], *, timeout: float | None = None, **kwargs: Any) -> subprocess.CompletedProcess:
        """Run `python args...` in the venv, capturing text output."""
        return subprocess.run([str(self.python), *args], env=kwargs.pop("env", None) or self.environ(),
                              capture_output=True, text=True, timeout=timeout, check=False, **kwargs)


def venv_environ(path: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment for a child in the venv at `path`: its `bin/` first, nothing leaking in.

    Byte-code is written even where PYTHONDONTWRITEBYTECODE is set (as on CI's machines): the venv
    is installed uncompiled (`_build`), so a module is compiled on its first import and kept,
    where otherwise every process of every run (a verl run starts a dozen) compiled it again."""
    env = {key: value for key, value in os.environ.items()
           if key not in LEAKY_VARS and key != "PYTHONDONTWRITEBYTECODE"}
    env["VIRTUAL_ENV"] = str(path)
    env["PATH"] = os.pathsep.join([str(Path(path) / "bin"), env.get("PATH", "")])
    env.update(extra or {})
    return env


def registered_recipe(registry: Registry, name: str, *, where: str) -> VenvRecipe:
    """The recipe of the venv a plugin registered as `name` (errors name the plugin)."""
    registration = registry.resolve("venv", name, key_path=where)
    provider = registration.plugin.provider
    try:
        recipe = registration.spec.load_factory()()
    except Exception as exc:  # noqa: BLE001 - a plugin's bug: name the plugin
        raise VenvBuildError(f"venv {name!r}: its recipe could not be made: {type(exc).__name__}: {exc}",
                             where=f"{where}, provided by {provider}") from exc
    if not isinstance(recipe, VenvRecipe):
        raise VenvBuildError(f"venv {name!r}: the factory returned {type(recipe).__name__}, not VenvRecipe",
                             where=f"{where}, provided by {provider}")
    return recipe


def venv_root() -> Path:
    """Where venvs are cached: `$BEYONDAGENT_VENVS`, else `$XDG_CACHE_HOME/beyondagent/venvs`."""
    if os.environ.get(ROOT_VAR):
        return Path(os.environ[ROOT_VAR]).expanduser()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "beyondagent" / "venvs"


def stale_venvs(current: dict[str, Path]) -> list[Path]:
    """Cached venvs of these names (`<name>-<key>` in `venv_root()`) other than the current one of each."""
    root = venv_root()
    if not root.is_dir():
        return []
    stale = []
    for path in sorted(root.iterdir()):
        name, _, key = path.name.rpartition("-")
        if path.is_dir() and name in current and len(key) == 12 and path != current[name]:
            stale.append(path)
    return stale


def locate(recipe: VenvRecipe) -> Venv:
    """The venv of `recipe` (built or not)."""
    return Venv(recipe, venv_root() / f"{recipe.name}-{recipe.key()}")


def ensure_venv(recipe: VenvRecipe, *, rebuild: bool = False,
                progress: Callable[[str], None] | None = None) -> Venv:
    """The ready venv of `recipe`, built first when missing (or when `rebuild`).

    Two processes asking at once build it once: the second waits on a lock and then finds it
    ready. `progress` is told each step as it starts ("pip install torch==2.13.0").
    """
    venv = locate(recipe)
    if venv.ready and not rebuild:
        return venv
    venv.path.parent.mkdir(parents=True, exist_ok=True)
    say = progress or (lambda _: None)
    with _locked(venv.path.with_name(venv.path.name + ".lock"),
                 waiting=lambda: say("waiting for another process that is building it")):
        if venv.ready and not rebuild:
            return venv
        _build(venv, say)
    return venv



def ensure_venv_printed(recipe: VenvRecipe, title: str, *, takes: str, rebuild: bool = False) -> Venv:
    """`ensure_venv` for a plugin's command line: says on stderr that `title`'s venv is being built
    (once; it `takes` about that long), each step as it starts, and the time it took."""
    if not locate(recipe).ready or rebuild:
        print(f"building the {title} venv in {locate(recipe).path} (once; {takes})", file=sys.stderr)
    started = time.monotonic()
    venv = ensure_venv(recipe, rebuild=rebuild, progress=lambda step: print(f"  {step}", file=sys.stderr))
    if time.monotonic() - started > 1:
        print(f"{title} venv ready in {time.monotonic() - started:.0f}s: {venv.path}", file=sys.stderr)
    return venv


HEARTBEAT_S = 30.0  # how often a build that prints to a file or a pipe says it is still running


def ensure_venv_with_status(recipe: VenvRecipe, label: str, *, rebuild: bool = False, console: Any | None = None,
                            takes: str = "a few minutes", heartbeat_s: float = HEARTBEAT_S) -> Venv:
    """`ensure_venv` that says on a rich `console` when the venv must be built first (a dry run or a run
    that needs it is otherwise silent for minutes): where, about how long, how to build it ahead, then
    each step as it starts with the time so far, a line every `heartbeat_s` while a step runs (a
    status line with the seconds counting on a terminal), and the total at the end."""
    if console is None:
        return ensure_venv(recipe, rebuild=rebuild)
    venv = locate(recipe)
    if venv.ready and not rebuild:
        return venv
    console.print(f"building the {label} venv (once, {takes}; `beyondagent venv build {recipe.name}` builds it "
                  f"ahead) in {venv.path}; its log: {venv.log_path}", highlight=False, markup=False)
    started = time.monotonic()
    current = ["checking"]
    done = threading.Event()
    terminal = bool(getattr(console, "is_terminal", False))

    def elapsed() -> str:
        return _clock(time.monotonic() - started)

    def progress(step: str) -> None:
        current[0] = step
        console.print(f"  [{elapsed()}] {step}", highlight=False, markup=False)

    with console.status(f"{label} venv: building") if terminal else contextlib.nullcontext() as status:
        def beat() -> None:
            while not done.wait(1.0 if terminal else heartbeat_s):
                if status is not None:
                    status.update(f"{label} venv: {current[0]} ({elapsed()})")
                else:
                    console.print(f"  [{elapsed()}] still at: {current[0]}", highlight=False, markup=False)

        ticker = threading.Thread(target=beat, name="venv-build-progress", daemon=True)
        ticker.start()
        try:
            venv = ensure_venv(recipe, rebuild=rebuild, progress=progress)
        finally:
            done.set()
            ticker.join(timeout=5)
    console.print(f"{label} venv ready in {elapsed()}: {venv.path}", highlight=False, markup=False)
    return venv


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s"


def probe_venv(venv: Venv, module: str, *, label: str, setup_command: str) -> dict[str, Any]:
    """Run a plugin's probe module in its venv: the JSON object its last line prints. A failure is
    a RunError with the tail of its output and the command that rebuilds the venv."""
    result = venv.run(["-m", module], timeout=300)
    if result.returncode != 0:
        raise RunError(f"checking {label}'s venv failed (exit {result.returncode}):\n{result.stderr[-2000:]}",
                       where=str(venv.path), hint=f"rebuild it: {setup_command} --rebuild")
    return json.loads(result.stdout.strip().splitlines()[-1])


@contextlib.contextmanager
def _locked(path: Path, waiting: Callable[[], None] = lambda: None) -> Iterator[None]:
    """An exclusive lock on `path`; `waiting()` is called first when another process holds it."""
    with path.open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            waiting()
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _build(venv: Venv, progress: Callable[[str], None]) -> None:
    recipe, started = venv.recipe, time.monotonic()
    shutil.rmtree(venv.path, ignore_errors=True)
    venv.path.parent.mkdir(parents=True, exist_ok=True)
    base = recipe.python or sys.executable
    # --no-compile: byte-compiling every module was 3/4 of torch's install time, and a run imports a
    # sixth of a venv's modules; each is compiled when a process first imports it and kept (`venv_environ`).
    pip = [str(venv.python), "-m", "pip", "--disable-pip-version-check"]
    install = [*pip, "install", "--no-compile"]
    commands: list[tuple[str, list[str]]] = [(f"python -m venv {venv.path}", [base, "-m", "venv", str(venv.path)])]
    commands += [(f"pip install {' '.join(step)}", [*install, *step]) for step in recipe.steps]
    local = [_local_source(name) for name in recipe.local]
    local_args = [arg for source in local for arg in _source_args(source)]
    if local_args:
        # Our source trees are built in the venv itself: an isolated build environment for each of
        # them (pip's default) cost ~13 s apiece, and a venv takes up to 20 of them.
        requires = _build_requirements(local)
        if requires:
            commands.append((f"pip install {' '.join(requires)}", [*install, *requires]))
        commands.append((f"pip install {' '.join(local_args)}", [*install, "--no-build-isolation", *local_args]))
    if recipe.uninstall:
        commands.append((f"pip uninstall {' '.join(recipe.uninstall)}", [*pip, "uninstall", "-y", *recipe.uninstall]))
    commands += [(" ".join(command), list(command)) for command in recipe.after]
    timings = []
    for label, command in commands:
        progress(label)
        step_started = time.monotonic()
        _run_step(venv, label, command)
        timings.append({"step": label, "seconds": round(time.monotonic() - step_started, 1)})
    checked = ""
    if recipe.check:
        progress("check")
        checked = _run_step(venv, "check", [str(venv.python), "-c", recipe.check]).strip()
    marker = {"name": recipe.name, "key": recipe.key(), "fingerprint": recipe.fingerprint(),
              "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "seconds": round(time.monotonic() - started, 1),
              "steps": timings, "check": checked}
    (venv.path / MARKER).write_text(json.dumps(marker, indent=2, default=str) + "\n")


def _run_step(venv: Venv, label: str, command: list[str]) -> str:
    """Run one build command, its output appended to build.log; returns its stdout."""
    venv.path.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(command, capture_output=True, text=True, env=venv.environ(), check=False,
                            stdin=subprocess.DEVNULL)
    with venv.log_path.open("a") as log:
        log.write(f"$ {' '.join(command)}\n{result.stdout}{result.stderr}\n[exit {result.returncode}]\n")
    if result.returncode != 0:
        output = result.stdout + result.stderr
        tail = "\n".join(line for line in output.splitlines() if "is ignored: it is neither" not in line)[-2500:]
        offline = any(sign in output for sign in OFFLINE_SIGNS)
        hint = (f"pip could not get a package from the index: check the network or your pip index settings "
                f"(PIP_INDEX_URL), then run the command again; the whole log is {venv.log_path}"
                if offline else f"the whole log is {venv.log_path}; fix the cause and run again "
                "(`beyondagent venv build {0} --rebuild` starts over)".format(venv.recipe.name))
        raise VenvBuildError(f"building the {venv.recipe.name!r} venv failed at `{label}` "
                             f"(exit {result.returncode}):\n{tail}", where=str(venv.path), hint=hint)
    return result.stdout


def _python_version(python: str | None) -> str:
    if python is None:
        return platform.python_version()
    result = subprocess.run([python, "-c", "import platform; print(platform.python_version())"],
                            capture_output=True, text=True, check=False)
    return result.stdout.strip() or python


def _local_source(name: str) -> dict[str, Any]:
    """How distribution `name` is installed here: an editable or local path, or a version."""
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        raise VenvBuildError(f"{name!r} is not installed here, so it cannot be installed into a plugin's venv",
                             hint=f"pip install {name}") from None
    source: dict[str, Any] = {"name": name, "version": dist.version}
    try:
        direct = json.loads(dist.read_text("direct_url.json") or "{}")
    except ValueError:
        direct = {}
    url = direct.get("url", "")
    if url.startswith("file://"):
        path = Path(url[len("file://"):])
        source["path"] = str(path)
        source["editable"] = bool(direct.get("dir_info", {}).get("editable"))
        pyproject = path / "pyproject.toml"
        if pyproject.is_file():
            source["pyproject"] = hashlib.sha256(pyproject.read_bytes()).hexdigest()[:12]
    return source


def _source_args(source: dict[str, Any]) -> list[str]:
    """pip's arguments installing a distribution the way `_local_source` found it installed here."""
    if "path" not in source:
        return [f"{source['name']}=={source['version']}"]
    return ["-e", source["path"]] if source["editable"] else [source["path"]]


def _build_requirements(sources: Sequence[dict[str, Any]]) -> list[str]:
    """What building the local source trees among `sources` needs: each one's `[build-system] requires`
    (PEP 517's setuptools where it names none), and `editables` for an editable install."""
    import tomllib

    requires: list[str] = []
    for source in sources:
        pyproject = Path(source["path"]) / "pyproject.toml" if "path" in source else None
        if pyproject is None or not pyproject.is_file():
            continue  # a version from the index, or a wheel file: nothing to build
        system = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("build-system", {})
        needed = system.get("requires", ["setuptools>=40.8.0"]) + (["editables"] if source["editable"] else [])
        requires += [requirement for requirement in needed if requirement not in requires]
    return requires


# --- helpers for plugins whose venv differs on GPU machines (verl, trinity) -------------------

STACKS = ("cpu", "gpu")


def machine_stack(variable: str) -> str:
    """`gpu` when this machine has NVIDIA GPUs (or the environment variable `variable` says so), else `cpu`."""
    chosen = os.environ.get(variable, "").strip().lower()
    if chosen:
        if chosen not in STACKS:
            raise ValueError(f"{variable} must be one of {', '.join(STACKS)}, got {chosen!r}")
        return chosen
    return "gpu" if shutil.which("nvidia-smi") else "cpu"


def local_plugin_distributions(always: Sequence[str], excluded: Sequence[str] = ()) -> list[str]:
    """Our distributions to install into a plugin's venv: `always` (the core, the plugin), then every other
    `beyondagent-plugin-*` installed here except `excluded`."""
    installed = sorted({
        dist.metadata["Name"].lower() for dist in metadata.distributions()
        if (dist.metadata["Name"] or "").lower().startswith("beyondagent-plugin-")
    })
    return [*always, *(name for name in installed if name not in always and name not in excluded)]

