"""What the CLI prints of errors, paths and metrics is text, never rich markup.

An exploration failure saying "one of [left, right]" printed as "one of ," (rich took the list for a
tag), and one holding "[/data/cache]" raised rich's MarkupError after the exploration had finished,
so the command ended in an internal error (found by the eighth mutation audit).
"""

from __future__ import annotations

from types import SimpleNamespace

from beyondagent_core.cli import print_exploration

ERRORS = ["t1#0: ValueError: action must be one of [left, right], got up",
          "t1#1: OSError: cannot write [/data/cache]"]


def test_exploration_failures_and_paths_print_as_they_are(capsys) -> None:
    result = SimpleNamespace(per_seed={"t1": 0}, explorations=2, completed=0, resumed=0, failures=2, candidates=0,
                             dropped_by_filter={"[bold]dedup": 1}, tasks=[], summarizer={}, llm={}, seconds=0.1,
                             errors=ERRORS)
    print_exploration(SimpleNamespace(result=result, seeds=["t1"], cache="runs/[x]/cache.jsonl", tasks=[]))
    out = capsys.readouterr().out
    for error in ERRORS:
        assert error.split(": ", 1)[1] in " ".join(out.split())  # rich may wrap a long line
    assert "runs/[x]/cache.jsonl" in out and "[bold]dedup" in out
