"""Claims in the docs that can go stale, checked against the code (issue 24, part 6).

- Every module or attribute the README and docs name in backticks (`beyondagent_core.x.y`,
  `beyondagent_plugin_torch.z`) exists: a file or package, and the attribute named in it.
- The ablation tables of docs/self-evolve.md state how to reproduce their step count: the
  script's default, or the `--steps N` they were run with.
- Guided rollouts are described the same way by docs/self-evolve.md and docs/verl.md.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted(ROOT.glob("plugins/*/README.md"))]
NAME = re.compile(r"`(beyondagent_(?:core|plugin_[a-z_]+)(?:\.[A-Za-z_][A-Za-z0-9_]*)+)")


def package_dir(top: str) -> Path | None:
    if top == "beyondagent_core":
        return ROOT / top
    return next(iter(ROOT.glob(f"plugins/*/{top}")), None)


def missing(dotted: str) -> str | None:
    """Why `dotted` names nothing in this checkout; None when it does."""
    parts = dotted.split(".")
    path = package_dir(parts[0])
    if path is None:
        return f"no package {parts[0]}"
    index = 1
    while index < len(parts):
        if (path / parts[index]).is_dir():
            path = path / parts[index]
        elif (path / f"{parts[index]}.py").is_file():
            path = path / f"{parts[index]}.py"
        else:
            break
        index += 1
    rest = parts[index:]
    source = path / "__init__.py" if path.is_dir() else path
    text = source.read_text(encoding="utf-8") if source.is_file() else ""
    if len(rest) > 2:  # module.Class.method at most
        return f"no module {'.'.join(parts[:index + 1])}"
    if rest and not re.search(rf"\b{re.escape(rest[0])}\b", text):
        return f"{source.relative_to(ROOT)} defines no {rest[0]}"
    return None


def named() -> list[tuple[str, str]]:
    return sorted({(doc.relative_to(ROOT).as_posix(), match) for doc in DOCS
                   for match in NAME.findall(doc.read_text(encoding="utf-8"))})


def test_the_docs_name_modules() -> None:
    assert len(named()) >= 10  # the pattern still finds what it checks


@pytest.mark.parametrize(("doc", "dotted"), named())
def test_each_module_the_docs_name_exists(doc: str, dotted: str) -> None:
    assert missing(dotted) is None, f"{doc} names `{dotted}`: {missing(dotted)}"


def test_missing_tells_a_stale_name() -> None:
    assert missing("beyondagent_plugin_torch.metric_names") is not None  # the name docs/verl.md once used
    assert missing("beyondagent_core.metric_names") is None
    assert missing("beyondagent_core.jsonl.write_tasks") is None


def test_the_ablation_tables_say_how_many_steps_they_ran() -> None:
    script = (ROOT / "benchmarks" / "self_evolve_ablation.py").read_text(encoding="utf-8")
    default = int(re.search(r'"--steps", type=int, default=(\d+)', script).group(1))
    doc = (ROOT / "docs" / "self-evolve.md").read_text(encoding="utf-8")
    section = doc[doc.index("\n## The ablation"):]
    section = section[:section.find("\n## ", 1)]
    headers = [line for line in section.splitlines() if line.startswith("| arm |")]
    assert headers
    for header in headers:
        last = max(int(a or b) for a, b in re.findall(r"step (\d+)|of (\d+) steps", header))
        assert last == default or f"--steps {last}" in section, f"a {last}-step table; the script defaults to {default}"


def test_guided_rollouts_are_described_alike_for_both_backends() -> None:
    verl = (ROOT / "docs" / "verl.md").read_text(encoding="utf-8")
    self_evolve = (ROOT / "docs" / "self-evolve.md").read_text(encoding="utf-8")
    assert "## Experience-guided rollouts" in verl  # verl runs them
    assert not re.search(r"[Gg]uided rollouts[^.]*torch-only", self_evolve)
