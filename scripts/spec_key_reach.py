"""Which spec keys no test ever sets: the first half of a reach audit (issue 37).

A key a test never sets to a non-default value can be ignored by the code that should read it and no
test would notice. This lists, for the core's sections and every registered component's config,
each key that appears nowhere in the test files as set (`key=`, `key:`, `"key":`, `key=` in an
override). It is a heuristic: a key that is set somewhere may still not be checked for its effect,
and a key set under another spelling is missed; the list is where to look, not a verdict.

    python scripts/spec_key_reach.py            # the unreached keys, by section and component
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import attrs

ROOT = Path(__file__).resolve().parents[1]


def test_text() -> str:
    files = [*ROOT.glob("tests/**/*.py"), *ROOT.glob("plugins/*/tests/**/*.py"), *ROOT.glob("plugins/*/tests/**/*.yaml"),
             *ROOT.glob("beyondagent_core/testing/**/*.py"), *ROOT.glob("examples/*.yaml")]
    return "\n".join(path.read_text(encoding="utf-8", errors="replace") for path in files)


def set_somewhere(key: str, text: str) -> bool:
    name = re.escape(key)
    return re.search(rf"(\b{name}\s*[:=][^=])|([\"']{name}[\"']\s*:)|(\.{name}=)|(\b{name}=)", text) is not None


def main() -> int:
    from beyondagent_core import spec as spec_module
    from beyondagent_core.logs import configure_logging
    from beyondagent_core.plugins import PluginManager, Switches
    from beyondagent_core.registry import Registry

    configure_logging(level="warning")

    manager = PluginManager(Switches.from_environment())
    manager.load()
    registry = Registry(manager)
    sections = {"run": spec_module.RunSection, "model": spec_module.ModelSection, "model.lora": spec_module.LoraSection,
                "algorithm": spec_module.AlgorithmSection, "algorithm.overlong": spec_module.OverlongShaping,
                "algorithm.sft": spec_module.SftWarmup, "logging": spec_module.LoggingSection,
                "env (block)": spec_module.EnvBlock, "explore (block)": spec_module.ExploreBlock,
                "mixture (block)": spec_module.MixtureBlock}
    for kind in spec_module.SELECTABLE_KINDS:
        for registration in registry.registrations(kind):
            config_cls = getattr(registration.spec, "config_cls", None)
            if config_cls is not None and attrs.has(config_cls):
                sections[f"{kind} {registration.spec.name} ({registration.plugin.distribution})"] = config_cls
    text = test_text()
    total = unreached = 0
    for where, cls in sections.items():
        missing = [f.name for f in attrs.fields(cls) if not f.name.startswith("_") and not set_somewhere(f.name, text)]
        total += len(attrs.fields(cls))
        unreached += len(missing)
        if missing:
            print(f"{where}: {', '.join(missing)}")
    print(f"{unreached} of {total} keys are set by no test or example")
    return 0


if __name__ == "__main__":
    sys.exit(main())
