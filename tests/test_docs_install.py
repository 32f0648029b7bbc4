"""How to install, as the pages say it, works from this repository (issue 36, item 6): no first-party
distribution is on a package index yet, so every `pip install` command line in the docs and READMEs
installs the core and the plugins from the checkout (`-e .`, `-e plugins/<x>`: folders that exist),
never `beyondagent-plugin-<x>` by name (docs/bfcl.md opened with one a newcomer could not install)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted(ROOT.glob("plugins/*/README.md"))]


def pip_install_lines() -> list[tuple[Path, str]]:
    """Each `pip install ...` command line in a fenced block or an inline command, with its page."""
    found = []
    for page in PAGES:
        for line in page.read_text(encoding="utf-8").splitlines():
            for command in re.findall(r"(?:^|`)\s*((?:python -m )?pip install [^`#]*)", line):
                found.append((page, command.strip()))
    return found


def test_every_install_command_installs_from_the_checkout() -> None:
    lines = pip_install_lines()
    assert any(page.name == "bfcl.md" for page, _ in lines)
    for page, command in lines:
        named = [word for word in command.split()[2:] if re.match(r"[\"']?beyondagent(-plugin-[\w-]+)?([\"'<>=\[]|$)",
                                                                    word)]
        assert not named, f"{page.relative_to(ROOT)}: `{command}` installs {named} from an index that has none"
        for folder in re.findall(r"(?<![\w/])(plugins/[\w-]+)", command):
            assert (ROOT / folder / "pyproject.toml").is_file(), f"{page.relative_to(ROOT)}: `{command}`: no {folder}"


def test_the_readme_says_how_to_install_plugins_from_the_checkout() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "## Installing" in readme and "pip install -e plugins/bfcl" in readme
    assert "(README, \"Installing\")" in (ROOT / "docs" / "bfcl.md").read_text(encoding="utf-8")
