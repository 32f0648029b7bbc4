"""Loading plugins: entry points of the `beyondagent` group, each one guarded.

Loading is an explicit call (`PluginManager.load()`), done once. Every plugin gets a
`PluginRecord` saying where it came from and whether it works: a plugin that fails to import,
implements a hook that does not exist, or whose registration hook raises or returns the wrong
thing becomes `status="error"` with a one-line reason, and everything else keeps working.

Switches (environment variables):
  BEYONDAGENT_DISABLE_PLUGIN_AUTOLOAD=1   load no entry points (only those in BEYONDAGENT_PLUGINS)
  BEYONDAGENT_PLUGINS=a,b                 load only these entry points (and the plugins they require)
  BEYONDAGENT_DISABLED_PLUGINS=x,y        never load these
"""

from __future__ import annotations

import difflib
import importlib
import os
import sys
import traceback
from collections.abc import Iterable, Sequence
from importlib import metadata
from typing import Any, Literal

import attrs
import pluggy

from beyondagent_core import __version__, hookspecs
from beyondagent_core.logs import apply_pending, get_logger
from beyondagent_core.records import RECORD_TYPE_BY_KIND, ComponentSpec

log = get_logger(__name__)

ENTRY_POINT_GROUP = "beyondagent"
BUILTIN_NAME = "builtin"
BUILTIN_MODULE = "beyondagent_core.builtin"
Status = Literal["ok", "disabled", "error"]


@attrs.define
class PluginRecord:
    """One plugin's identity, state and what it registered."""

    name: str
    distribution: str | None = None
    version: str | None = None
    value: str | None = None
    status: Status = "ok"
    error: str | None = None
    traceback: str | None = None
    hooks: list[str] = attrs.field(factory=list)
    components: list[ComponentSpec] = attrs.field(factory=list)

    @property
    def provider(self) -> str:
        """`distribution version (entry point)`, the way errors and listings name a plugin."""
        dist = self.distribution or "?"
        return f"{dist} {self.version or '?'} ({self.name})"

    @property
    def provides(self) -> dict[str, list[str]]:
        provided: dict[str, list[str]] = {}
        for component in self.components:
            provided.setdefault(component.kind, []).append(component.name)
        return provided

    def fail(self, reason: str, exc: BaseException | None = None) -> None:
        self.status = "error"
        self.error = reason
        self.components = []
        if exc is not None:
            self.traceback = "".join(traceback.format_exception(exc))

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "distribution": self.distribution,
            "version": self.version,
            "entry_point": self.value,
            "status": self.status,
            "error": self.error,
            "hooks": list(self.hooks),
            "provides": self.provides,
        }


def _split_env(var: str) -> set[str]:
    return {part.strip() for part in os.environ.get(var, "").split(",") if part.strip()}


@attrs.define
class Switches:
    """Which entry points to load: from the environment and the spec's `plugins.disable`."""

    autoload: bool = True
    allow: set[str] = attrs.field(factory=set)
    deny: set[str] = attrs.field(factory=set)

    @classmethod
    def from_environment(cls, extra_disabled: Iterable[str] = ()) -> Switches:
        autoload = os.environ.get("BEYONDAGENT_DISABLE_PLUGIN_AUTOLOAD", "").strip().lower() not in (
            "1", "true", "yes", "on",
        )
        return cls(
            autoload=autoload,
            allow=_split_env("BEYONDAGENT_PLUGINS"),
            deny=_split_env("BEYONDAGENT_DISABLED_PLUGINS") | set(extra_disabled),
        )

    def why_not(self, name: str) -> str | None:
        """The reason an entry point is not loaded, or None when it is."""
        if name in self.deny:
            return "disabled by BEYONDAGENT_DISABLED_PLUGINS or the spec's plugins.disable"
        if self.allow and name not in self.allow:
            return "not listed in BEYONDAGENT_PLUGINS"
        if not self.autoload and name not in self.allow:
            return "BEYONDAGENT_DISABLE_PLUGIN_AUTOLOAD is set"
        return None


class PluginManager:
    """Our facade over pluggy: load plugins, hold their records, call lifecycle hooks.

    Callers never touch `pluggy`'s hook relay directly; they use `components()`,
    `records` and `notify()`.
    """

    def __init__(self, switches: Switches | None = None):
        self.switches = switches if switches is not None else Switches.from_environment()
        self._pm = pluggy.PluginManager(hookspecs.PROJECT)
        self._pm.add_hookspecs(hookspecs)
        self.records: dict[str, PluginRecord] = {}
        self._loaded = False

    # --- loading -----------------------------------------------------------------------------

    def load(self) -> PluginManager:
        """Register the built-in components and every enabled entry point (once)."""
        if self._loaded:
            return self
        self._loaded = True
        # The core's own components are a plugin like any other, loaded by name: the loader
        # depends on no implementation (no import cycle through every built-in's config).
        builtin = importlib.import_module(BUILTIN_MODULE)
        self.register(builtin, BUILTIN_NAME, distribution="beyondagent", version=__version__, value=BUILTIN_MODULE)
        entry_points = _entry_points()
        if self.switches.allow:  # a listed plugin brings the plugins its distribution requires
            self.switches = attrs.evolve(self.switches, allow=_with_requirements(self.switches.allow, entry_points))
        for entry_point in entry_points:
            self._load_entry_point(entry_point)
        # Each plugin's unknown hooks were caught (and the plugin unregistered) above, so
        # pluggy's own check can only fail on a bug here.
        self._pm.check_pending()
        if "structlog" in sys.modules:  # a plugin imported it itself: its events get our format too
            apply_pending()
        return self

    def _load_entry_point(self, entry_point: metadata.EntryPoint) -> None:
        dist = entry_point.dist
        record = PluginRecord(
            name=entry_point.name,
            distribution=dist.metadata["Name"] if dist is not None else None,
            version=dist.version if dist is not None else None,
            value=entry_point.value,
        )
        if record.name in self.records:
            other = self.records[record.name]
            log.warning("plugins.duplicate_entry_point", name=record.name,
                        kept=other.provider, ignored=record.provider)
            return
        self.records[record.name] = record
        reason = self.switches.why_not(record.name)
        if reason:
            record.status, record.error = "disabled", reason
            return
        try:
            plugin = entry_point.load()
        except BaseException as exc:  # noqa: BLE001 - any failure of a plugin's import is reported, not raised
            if isinstance(exc, KeyboardInterrupt):
                raise
            record.fail(f"import of {entry_point.value!r} failed: {_one_line(exc)}", exc)
            log.debug("plugins.import_failed", plugin=record.name, traceback=record.traceback)
            return
        self._register_guarded(plugin, record)

    def register(self, plugin: object, name: str, *, distribution: str | None = None,
                 version: str | None = None, value: str | None = None) -> PluginRecord:
        """Register a plugin object (a module or any object with hookimpls) under `name`.

        Used for the built-ins and by `beyondagent_core.testing` for inline plugins. A broken
        plugin is recorded as an error, never raised.
        """
        record = PluginRecord(name=name, distribution=distribution, version=version,
                              value=value or getattr(plugin, "__name__", type(plugin).__name__))
        if name in self.records and self.records[name].status != "disabled":
            record.fail(f"a plugin named {name!r} is already registered ({self.records[name].provider})")
            self.records[f"{name}#{len(self.records)}"] = record
            return record
        self.records[name] = record
        self._register_guarded(plugin, record)
        return record

    def _register_guarded(self, plugin: object, record: PluginRecord) -> None:
        try:
            self._pm.register(plugin, name=record.name)
        except Exception as exc:  # pluggy.PluginValidationError: a hook's signature does not match
            # pluggy's first line names only the hook; the last one says what is wrong with it.
            lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
            detail = f" ({lines[-1]})" if len(lines) > 1 else ""
            record.fail(f"registration failed: {_one_line(exc)}{detail}", exc)
            return
        callers = self._pm.get_hookcallers(plugin) or []
        record.hooks = sorted(caller.name for caller in callers)
        unknown = [name for name in record.hooks if name not in _known_hooks()]
        if unknown:
            self._pm.unregister(plugin)
            record.fail("; ".join(_unknown_hook_message(name) for name in unknown))
            return
        for kind, hook_name in hookspecs.REGISTRATION_HOOKS.items():
            if hook_name in record.hooks and not self._collect(plugin, record, kind, hook_name):
                self._pm.unregister(plugin)
                return
        log.debug("plugins.registered", plugin=record.name, provides=record.provides)

    def _collect(self, plugin: object, record: PluginRecord, kind: str, hook_name: str) -> bool:
        """Call one plugin's registration hook and check what it returned."""
        impl = next(i for i in getattr(self._pm.hook, hook_name).get_hookimpls() if i.plugin is plugin)
        expected = RECORD_TYPE_BY_KIND[kind]
        try:
            returned = impl.function()
        except Exception as exc:  # noqa: BLE001 - a raising hook marks only its own plugin broken
            record.fail(f"hook {hook_name} raised {_one_line(exc)}", exc)
            return False
        if returned is None:
            return True
        if not isinstance(returned, (list, tuple)):
            record.fail(f"hook {hook_name} returned a single {type(returned).__name__}, expected a list of "
                        f"{expected.__name__} records (return [{expected.__name__}(...)])")
            return False
        items = returned
        for item in items:
            if not isinstance(item, expected):
                record.fail(
                    f"hook {hook_name} returned {type(item).__name__}, expected a list of "
                    f"{expected.__name__} records"
                )
                return False
            record.components.append(item)
        return True

    # --- using -------------------------------------------------------------------------------

    def components(self) -> Iterable[tuple[ComponentSpec, PluginRecord]]:
        """Every component registered by a working plugin, with its provider."""
        for record in self.records.values():
            if record.status == "ok":
                for component in record.components:
                    yield component, record

    def notify(self, hook_name: str, **kwargs: Any) -> None:
        """Call a lifecycle hook on every plugin; a failing implementation is logged, not raised."""
        assert hook_name in hookspecs.LIFECYCLE_HOOKS, hook_name
        for impl in getattr(self._pm.hook, hook_name).get_hookimpls():
            try:
                impl.function(**{name: kwargs[name] for name in impl.argnames})
            except Exception as exc:  # noqa: BLE001 - a notifier must never break a run
                log.error("plugins.lifecycle_hook_failed", plugin=impl.plugin_name, hook=hook_name,
                          error=_one_line(exc))

    def first_answer(self, hook_name: str, **kwargs: Any) -> Any:
        """A service hook's answer from the first plugin that gives one (None when none does)."""
        assert hook_name in hookspecs.SERVICE_HOOKS, hook_name
        return getattr(self._pm.hook, hook_name)(**kwargs)

    def broken(self) -> list[PluginRecord]:
        return [record for record in self.records.values() if record.status == "error"]

    def disabled(self) -> list[PluginRecord]:
        return [record for record in self.records.values() if record.status == "disabled"]


def why_absent(plugin: str, record: PluginRecord | None, *, provides: str) -> tuple[str, str]:
    """Why first-party plugin `plugin` gives nothing here, and what to do: (problem, hint)."""
    dist = f"beyondagent-plugin-{plugin}"
    if record is None:
        return f"the plugin {dist} is not installed", f"pip install {dist}"
    if record.status == "disabled":
        return (f"the plugin {plugin!r} is disabled: {record.error}",
                "enable it (BEYONDAGENT_PLUGINS / BEYONDAGENT_DISABLED_PLUGINS / BEYONDAGENT_DISABLE_PLUGIN_AUTOLOAD)")
    if record.status == "error":
        return f"the plugin {plugin!r} failed to load: {record.error}", "`beyondagent plugins -v` says why"
    return f"the plugin {plugin!r} ({record.provider}) provides no {provides}", f"pip install -U {dist}"


def _entry_points() -> list[metadata.EntryPoint]:
    """The group's entry points, one per (name, distribution), in a stable order."""
    seen: set[tuple[str, str]] = set()
    unique = []
    for entry_point in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name):
        dist_name = entry_point.dist.metadata["Name"] if entry_point.dist is not None else ""
        if (entry_point.name, dist_name) not in seen:
            seen.add((entry_point.name, dist_name))
            unique.append(entry_point)
    return unique


def _with_requirements(allow: set[str], entry_points: list[metadata.EntryPoint]) -> set[str]:
    """`allow` plus, transitively, the entry points of the distributions those plugins require
    (`BEYONDAGENT_PLUGINS=torch` also loads `advantages`, which `beyondagent-plugin-torch` needs)."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    by_dist: dict[str, list[str]] = {}
    for entry_point in entry_points:
        if entry_point.dist is not None:
            by_dist.setdefault(canonicalize_name(entry_point.dist.metadata["Name"]), []).append(entry_point.name)
    result, pending = set(allow), list(allow)
    while pending:
        name = pending.pop()
        for entry_point in entry_points:
            if entry_point.name != name or entry_point.dist is None:
                continue
            for text in entry_point.dist.requires or []:
                try:
                    requirement = Requirement(text)
                except InvalidRequirement:
                    continue
                if requirement.marker is not None and "extra" in str(requirement.marker):
                    continue  # optional extras (test, ...) do not come along
                for needed in by_dist.get(canonicalize_name(requirement.name), []):
                    if needed not in result:
                        result.add(needed)
                        pending.append(needed)
    return result


def _known_hooks() -> set[str]:
    return set(hookspecs.REGISTRATION_HOOKS.values()) | set(hookspecs.LIFECYCLE_HOOKS) | set(hookspecs.SERVICE_HOOKS)


def _unknown_hook_message(name: str) -> str:
    close = difflib.get_close_matches(name, sorted(_known_hooks()), n=1)
    suggestion = f" (did you mean {close[0]}?)" if close else ""
    return f"implements unknown hook {name}{suggestion}"


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def check_requirements(requirements: Sequence[str], *, where: str) -> None:
    """Check the spec's `plugins.require` (PEP 508 strings) against installed distributions."""
    from packaging.requirements import InvalidRequirement, Requirement

    from beyondagent_core.errors import RequirementError, SpecError

    for text in requirements:
        try:
            requirement = Requirement(text)
        except InvalidRequirement as exc:
            raise SpecError(f"plugins.require entry {text!r} is not a valid requirement: {exc}", where=where,
                            hint="write requirements like 'beyondagent-plugin-mixers>=0.1'") from None
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        try:
            installed = metadata.version(requirement.name)
        except metadata.PackageNotFoundError:
            raise RequirementError(f"required distribution {requirement.name!r} is not installed ({text!r})",
                                   where=where, hint=f"pip install '{text}'") from None
        if requirement.specifier and not requirement.specifier.contains(installed, prereleases=True):
            raise RequirementError(
                f"required {text!r} but {requirement.name} {installed} is installed", where=where,
                hint=f"pip install '{text}'",
            )
