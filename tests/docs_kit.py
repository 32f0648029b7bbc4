"""Building a plugin from a walk-through page's own code blocks (shared by the docs tests).

Each Python block that starts with a `# path` comment is that file; a block whose info string
names a file (```` ```jsonl title="data/train.jsonl" ````) is that file; the TOML block with
`[build-system]` is `pyproject.toml` (its dependencies emptied: the core is importable here);
the YAML block is `spec.yaml`. The plugin is installed with real pip, offline (`--no-deps
--no-build-isolation`), into a target folder put on PYTHONPATH for the commands run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def walkthrough_files(doc: Path) -> dict[str, str]:
    files = {}
    for lang, info, body in re.findall(r"```(\w+)([^\n]*)\n(.*?)```", doc.read_text(encoding="utf-8"), re.S):
        first = body.splitlines()[0]
        if title := re.search(r'title="([^"]+)"', info):
            files[title.group(1)] = body
        elif lang == "toml" and "[build-system]" in body:
            files["pyproject.toml"] = body.replace('dependencies = ["beyondagent>=0.1"]', "dependencies = []")
        elif lang == "python" and (match := re.fullmatch(r"# (\S+\.py)", first)):
            files[match.group(1)] = body
        elif lang == "yaml":
            files["spec.yaml"] = body
    return files


def install(doc: Path, package: Path, site: Path) -> None:
    for name, body in walkthrough_files(doc).items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(body, encoding="utf-8")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--target", str(site), str(package)], check=True, capture_output=True, timeout=300)


def run(args: list[str], site: Path, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BEYONDAGENT_")}
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(ROOT)])
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
