"""CLI start-up time: `beyondagent plugins --json` against `python -c pass`, the floor, in one run.

What is measured
    Wall time of fresh processes, alternated (floor, CLI, floor, CLI, ...) so that machine load
    hits both alike: `python -c pass` (the interpreter alone), `python -c "import
    beyondagent_core.cli"` (the CLI's imports), `beyondagent --version` and `beyondagent plugins
    --json` (entry points of every installed plugin loaded and listed). Nothing heavy (torch,
    transformers, ray, verl) may be imported on that path: the script also reports whether any of
    them was (`python -X importtime`).

How to read the output
    Per command: median and min-max seconds over `--runs` runs, and over the floor. The last line
    is `plugins_json_seconds: X` (median); the target is < 0.3 s on a quiet machine.

    python benchmarks/cli_startup.py             # 15 runs each
    python benchmarks/cli_startup.py --runs 5

Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

HEAVY = ("torch", "transformers", "ray", "verl", "vllm", "numpy", "pandas", "httpx", "openai", "starlette")


def commands() -> dict[str, list[str]]:
    cli = shutil.which("beyondagent") or f"{os.path.dirname(sys.executable)}/beyondagent"
    return {
        "python -c pass (floor)": [sys.executable, "-c", "pass"],
        "import beyondagent_core.cli": [sys.executable, "-c", "import beyondagent_core.cli"],
        "beyondagent --version": [cli, "--version"],
        "beyondagent plugins --json": [cli, "plugins", "--json"],
    }


def timed(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def heavy_imports() -> list[str]:
    """Top-level packages from HEAVY that `beyondagent plugins --json`'s code path imports."""
    code = ("import sys; from beyondagent_core.cli import main; "
            "sys.argv = ['beyondagent', 'plugins', '--json']; "
            "import contextlib, io\nwith contextlib.redirect_stdout(io.StringIO()):\n"
            "    try: main(sys.argv[1:])\n    except SystemExit: pass\n"
            "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    return [name for name in HEAVY if name in loaded]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args(argv)
    runs: dict[str, list[float]] = {name: [] for name in commands()}
    for argv_ in commands().values():  # warm the page cache, not counted
        timed(argv_)
    for _ in range(args.runs):
        for name, argv_ in commands().items():
            runs[name].append(timed(argv_))
    floor = statistics.median(runs["python -c pass (floor)"])
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {args.runs} runs each")
    for name, times in runs.items():
        median = statistics.median(times)
        print(f"  {name:<30} {median:6.3f} s  (min {min(times):.3f}, max {max(times):.3f})  "
              f"+{median - floor:.3f} s over the floor")
    heavy = heavy_imports()
    print(f"heavy packages imported by `plugins --json`: {', '.join(heavy) or 'none'}")
    print(f"plugins_json_seconds: {statistics.median(runs['beyondagent plugins --json']):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
