"""The core's layering, checked from its source: the contract imports nothing of the implementation,
no module of the core or of a plugin takes part in an import cycle (TYPE_CHECKING and function-level imports
count too: they are how the 22-module cycle through `plugins.py` -> `builtin.py` hid), and what
the core ships asks no LLM: the LLM-based synthesis and judging (the `llm` summarizer, the
feasibility filter's LLM solver, `llm_judge`) live in `plugins/llm`, which the core never imports.
"""

from __future__ import annotations

import ast
from pathlib import Path

CORE = Path(__file__).resolve().parents[1] / "beyondagent_core"
CONTRACT = {"beyondagent_core.hookspecs", "beyondagent_core.records", "beyondagent_core.protocols",
            "beyondagent_core.types", "beyondagent_core.advantages", "beyondagent_core.experience",
            "beyondagent_core.checks", "beyondagent_core.errors"}


# The core's own components and synthesis: none of them imports the LLM client (`llm.py`, openai);
# they may still be handed a `ChatLLM` (the feasibility filter's machinery runs any solver's).
NO_LLM = ("beyondagent_core.builtin", "beyondagent_core.judging",
          "beyondagent_core.exploration")
PLUGINS = CORE.parent / "plugins"


def modules(package: Path = CORE) -> dict[str, Path]:
    found = {}
    for path in package.rglob("*.py"):
        name = ".".join(path.relative_to(package.parent).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


def import_graph(package: Path = CORE) -> dict[str, set[str]]:
    """The modules of `package` (the core, or a plugin's package) and which of them each imports."""
    known = modules(package)
    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(package.name):
                for alias in node.names:
                    target = f"{node.module}.{alias.name}"
                    graph[name].add(target if target in known else node.module)
            elif isinstance(node, ast.Import):
                graph[name].update(alias.name for alias in node.names if alias.name in known)
    return graph


def imported_modules(path: Path) -> set[str]:
    """Every module `path` imports, by its dotted name (TYPE_CHECKING and function-level included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_contract_imports_only_the_contract() -> None:
    graph = import_graph()
    for name in sorted(CONTRACT):
        outside = sorted(graph[name] - CONTRACT - {"beyondagent_core"})
        assert not outside, f"{name} imports the implementation: {outside}"


def test_the_core_has_no_import_cycle() -> None:
    assert cycles(import_graph()) == []


def test_no_plugin_has_an_import_cycle() -> None:
    packages = sorted(PLUGINS.glob("*/beyondagent_plugin_*"))
    assert len(packages) >= 15
    found = {package.name: cycles(import_graph(package)) for package in packages}
    assert {name: found_cycles for name, found_cycles in found.items() if found_cycles} == {}


def test_the_cycle_check_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_core_imports_no_plugin() -> None:
    for name, path in sorted(modules().items()):
        found = sorted(m for m in imported_modules(path) if m.split(".")[0].startswith("beyondagent_plugin_"))
        assert not found, (f"{name} imports the plugin module(s) {found}: plugins build on the core, not the "
                           "reverse (ask an installed component through the registry instead)")


def test_what_the_core_ships_asks_no_llm() -> None:
    for name, path in sorted(modules().items()):
        if name.startswith(NO_LLM):
            clients = imported_modules(path) & {"beyondagent_core.llm", "openai"}
            assert not clients, f"{name} imports an LLM client {sorted(clients)}: LLM-based parts go in plugins/llm"


def test_the_llm_based_parts_are_the_llm_plugin() -> None:
    assert not (CORE / "judges").exists() and not (CORE / "synthesis").exists()
    package = PLUGINS / "llm" / "beyondagent_plugin_llm"
    assert {"summarizer.py", "judge.py", "feasibility.py"} <= {p.name for p in package.glob("*.py")}
    assert "beyondagent_plugin_synthesis.feasibility" in imported_modules(package / "feasibility.py")


def test_the_offline_synthesis_plugin_asks_no_llm() -> None:
    package = PLUGINS / "synthesis" / "beyondagent_plugin_synthesis"
    for path in sorted(package.glob("*.py")):
        clients = imported_modules(path) & {"beyondagent_core.llm", "openai"}
        assert not clients, f"{path.name} imports an LLM client {sorted(clients)}: LLM-based parts go in plugins/llm"


def declared_plugins(plugin_dir: Path, seen: set[str] | None = None) -> set[str]:
    """The first-party plugin packages `plugin_dir`'s pyproject requires, directly or through another."""
    import re
    import tomllib

    seen = set() if seen is None else seen
    project = tomllib.loads((plugin_dir / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    for requirement in project.get("dependencies", []):
        name = re.match(r"[A-Za-z0-9_.\-]+", requirement).group(0).lower()
        folder = name.removeprefix("beyondagent-plugin-").replace("-", "_")
        if name.startswith("beyondagent-plugin-") and folder not in seen:
            seen.add(folder)
            declared_plugins(PLUGINS / folder, seen)
    return {f"beyondagent_plugin_{folder}" for folder in seen}


def required_imports(path: Path) -> set[str]:
    """The modules `path` imports, less those imported under `try: ... except ImportError:` (an
    optional use that says what to install when the other plugin is missing)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    optional = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
                isinstance(handler.type, ast.Name) and handler.type.id in ("ImportError", "ModuleNotFoundError")
                for handler in node.handlers):
            optional.update(id(inner) for statement in node.body for inner in ast.walk(statement))
    found = set()
    for node in ast.walk(tree):
        if id(node) in optional:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_a_plugin_imports_only_the_plugins_it_requires() -> None:
    """What a plugin imports of another first-party plugin, its distribution declares (pip installs it):
    e.g. appworld's launched env server is beyondagent-plugin-envservice's. An optional use, guarded by
    `except ImportError` with a message saying what to install, is allowed."""
    undeclared = {}
    for package in sorted(PLUGINS.glob("*/beyondagent_plugin_*")):
        allowed = declared_plugins(package.parent) | {package.name}
        for name, path in sorted(modules(package).items()):
            imported = {m.split(".")[0] for m in required_imports(path) if m.startswith("beyondagent_plugin_")}
            if imported - allowed:
                undeclared[name] = sorted(imported - allowed)
    assert undeclared == {}


def test_a_plugin_venv_installs_the_plugins_it_requires() -> None:
    """A venv recipe's `local=[...]` (what is installed into a plugin's own venv from this checkout)
    names every first-party plugin the plugin requires: appworld's env server, launched in its venv,
    is beyondagent-plugin-envservice's."""
    missing = {}
    for package in sorted(PLUGINS.glob("*/beyondagent_plugin_*")):
        required = {name.replace("beyondagent_plugin_", "beyondagent-plugin-").replace("_", "-")
                    for name in declared_plugins(package.parent)}
        for name, path in sorted(modules(package).items()):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.keyword) and node.arg == "local" and isinstance(node.value, ast.List):
                    listed = {item.value for item in node.value.elts if isinstance(item, ast.Constant)}
                    if required - listed:
                        missing[name] = sorted(required - listed)
    assert missing == {}
