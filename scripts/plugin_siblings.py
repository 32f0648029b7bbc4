"""Print the folders (under plugins/) of the first-party plugins a plugin's pyproject depends on,
directly or through another first-party plugin, those depended on first.

Usage: python plugin_siblings.py plugins/appworld   ->   synthesis llm
Used by check_plugins_ship.sh, which installs their wheels (built from this checkout) with the plugin's.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path


def direct(plugin_dir: Path) -> list[str]:
    project = tomllib.loads((plugin_dir / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    found = []
    for requirement in project.get("dependencies", []):
        name = re.match(r"[A-Za-z0-9_.\-]+", requirement).group(0).lower()
        if name.startswith("beyondagent-plugin-"):
            folder = name.removeprefix("beyondagent-plugin-").replace("-", "_")
            if (plugin_dir.parent / folder / "pyproject.toml").is_file():
                found.append(folder)
    return found


def siblings(plugin_dir: Path) -> list[str]:
    """Every first-party plugin `plugin_dir` needs, each after the ones it needs itself."""
    ordered: list[str] = []

    def visit(folder: str) -> None:
        for needed in direct(plugin_dir.parent / folder):
            if needed not in ordered:
                visit(needed)
                ordered.append(needed)

    visit(plugin_dir.name)
    return ordered


if __name__ == "__main__":
    print(" ".join(siblings(Path(sys.argv[1]))))
