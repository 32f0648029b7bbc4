"""Checking `plugins.settings`: each block against the schema its plugin declares.

A plugin no spec section selects (a notifier) reads its settings from `plugins.settings.<name>`
and declares the block with a `SettingsSpec` (`beyondagent_settings` hook). Every command that
reads a spec checks each block here, so `plugins.settings.notify.stall_minuts` fails with its
key path instead of being ignored, and a block named after no installed plugin is an error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from beyondagent_core.errors import SpecError

if TYPE_CHECKING:
    from beyondagent_core.registry import Registry

SETTINGS_KIND = "settings"
SETTINGS_PATH = "plugins.settings"


def check_plugin_settings(settings: dict[str, Any], registry: Registry, where: str,
                          structured: Callable[..., Any]) -> dict[str, Any]:
    """Each block of `plugins.settings` checked against its plugin's schema; name -> config object.

    `structured` is the spec's merge-and-check of a block over its config class (passed in: the
    spec module calls this one, and an import back would be a cycle). A block for a plugin that
    is installed but disabled or broken is not checked (that plugin will not read it, and
    `beyondagent plugins` says why).
    """
    checked: dict[str, Any] = {}
    for name, block in settings.items():
        key_path = f"{SETTINGS_PATH}.{name}"
        record = registry.manager.records.get(str(name))
        if record is not None and record.status != "ok":
            continue
        registration = registry.resolve(SETTINGS_KIND, str(name), key_path=f"{where}, key {key_path}")
        if not isinstance(block, dict):
            raise SpecError(f"{key_path} must be a mapping of the plugin's settings, got {type(block).__name__}",
                            where=f"{where}, key {key_path}",
                            hint=f"write {key_path}: {{key: value, ...}}")
        spec = registration.spec
        checked[str(name)] = structured(spec.config_cls, block, key_path, where,
                                        owner=f" (the settings of {registration.plugin.provider})")
    return checked
