"""Name -> component: resolving what a spec selects, with errors a user can act on.

A name registered by two plugins is never resolved by load order: selecting it is an error
naming every provider, and `plugin/name` picks one. An unknown name lists what exists,
suggests the closest, and hints at the package that would provide it.
"""

from __future__ import annotations

import difflib
from collections import defaultdict

import attrs

from beyondagent_core.errors import AmbiguousComponentError, UnknownComponentError
from beyondagent_core.plugins import PluginManager, PluginRecord
from beyondagent_core.records import RECORD_TYPE_BY_KIND, ComponentSpec

# First-party plugins and what they provide, for "pip install ..." hints on unknown names.
FIRST_PARTY: dict[str, dict[str, tuple[str, ...]]] = {
    "beyondagent-plugin-mixers": {"mixer": ("original", "synthetic", "ratio")},
    "beyondagent-plugin-torch": {"backend": ("torch",)},
    "beyondagent-plugin-verl": {"backend": ("verl",)},
    "beyondagent-plugin-gym": {"env": ("frozenlake", "taxi", "cliffwalking"), "task_source": ("gym_tasks",)},
    "beyondagent-plugin-appworld": {"env": ("appworld",), "task_source": ("appworld",)},
    "beyondagent-plugin-math": {"task_source": ("arithmetic", "gsm8k", "math"), "reward": ("math",)},
    "beyondagent-plugin-random-explorer": {"explorer": ("random",)},
    "beyondagent-plugin-advantages": {"advantage": ("grpo", "gigpo", "adca")},
    "beyondagent-plugin-experience": {"experience_store": ("experience",)},
    "beyondagent-plugin-notify": {"settings": ("notify",)},
    "beyondagent-plugin-llm": {"summarizer": ("llm",), "task_filter": ("feasibility",), "reward": ("llm_judge",)},
    "beyondagent-plugin-synthesis": {"summarizer": ("hindsight",), "task_filter": ("dedup", "min_confidence")},
    "beyondagent-plugin-gateway": {"workflow": ("agent",)},
    "beyondagent-plugin-report": {"command": ("eval", "report")},
    "beyondagent-plugin-envservice": {"task_source": ("envservice",), "command": ("env",)},
    "beyondagent-plugin-textarena": {"env": ("textarena",), "task_source": ("textarena_tasks",)},
}


@attrs.frozen
class Registration:
    """A component record together with the plugin that provided it."""

    spec: ComponentSpec
    plugin: PluginRecord

    @property
    def qualified_name(self) -> str:
        return f"{self.plugin.name}/{self.spec.name}"


class Registry:
    """Every component of every working plugin, by kind and name."""

    def __init__(self, manager: PluginManager):
        self.manager = manager
        self._by_kind: dict[str, dict[str, list[Registration]]] = defaultdict(lambda: defaultdict(list))
        for spec, plugin in manager.components():
            self._by_kind[spec.kind][spec.name].append(Registration(spec, plugin))

    def names(self, kind: str) -> list[str]:
        return sorted(self._by_kind[kind])

    def registrations(self, kind: str) -> list[Registration]:
        return [reg for name in self.names(kind) for reg in self._by_kind[kind][name]]

    def conflicts(self) -> dict[str, dict[str, list[str]]]:
        """kind -> name -> providers, for every name provided more than once."""
        found: dict[str, dict[str, list[str]]] = {}
        for kind, names in self._by_kind.items():
            for name, regs in names.items():
                if len(regs) > 1:
                    found.setdefault(kind, {})[name] = [reg.plugin.provider for reg in regs]
        return found

    def resolve(self, kind: str, name: str, *, key_path: str) -> Registration:
        """The registration a spec means by `name` (or `plugin/name`) at `key_path`."""
        label = RECORD_TYPE_BY_KIND[kind].label
        plugin_name, _, short_name = name.rpartition("/")
        candidates = self._by_kind[kind].get(short_name, [])
        if plugin_name:
            picked = [reg for reg in candidates if reg.plugin.name == plugin_name]
            if not picked:
                providers = ", ".join(reg.qualified_name for reg in candidates) or "none"
                raise UnknownComponentError(
                    f"plugin {plugin_name!r} provides no {label} named {short_name!r}",
                    where=key_path,
                    hint=f"{label}s named {short_name!r} come from: {providers}; "
                    "run `beyondagent plugins` to see every plugin",
                )
            return picked[0]
        if len(candidates) == 1:
            return candidates[0]
        if len(candidates) > 1:
            providers = "; ".join(f"{reg.plugin.provider}" for reg in candidates)
            choices = " or ".join(f"{reg.qualified_name!r}" for reg in candidates)
            raise AmbiguousComponentError(
                f"{label} {short_name!r} is provided by {len(candidates)} plugins: {providers}",
                where=key_path,
                hint=f"pick one with {choices}, or uninstall/disable the one you do not want",
            )
        raise UnknownComponentError(self._unknown_message(kind, short_name), where=key_path,
                                    hint=self._unknown_hint(kind, short_name))

    def _unknown_message(self, kind: str, name: str) -> str:
        label = RECORD_TYPE_BY_KIND[kind].label
        available = self.names(kind)
        message = f"unknown {label} {name!r}"
        close = difflib.get_close_matches(name, available, n=1, cutoff=0.6)
        if close:
            message += f" (did you mean {close[0]!r}?)"
        message += f". Available {label}s: {', '.join(available) if available else 'none installed'}"
        return message

    def _unknown_hint(self, kind: str, name: str) -> str:
        hints = [
            f"pip install {package}"
            for package, provided in FIRST_PARTY.items()
            if name in provided.get(kind, ())
        ]
        manager = self.manager
        if broken := manager.broken():
            hints.append("these plugins failed to load and may provide it: "
                         + "; ".join(f"{r.name} ({r.error})" for r in broken))
        if disabled := manager.disabled():
            hints.append("these plugins are disabled: " + ", ".join(r.name for r in disabled))
        if not hints:
            hints.append("install the plugin that provides it (`pip install beyondagent-plugin-<x>`); "
                         "`beyondagent plugins` lists what is installed")
        return "; ".join(hints)
