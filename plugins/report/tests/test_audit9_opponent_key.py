"""`beyondagent eval --opponent-model` sends each endpoint its own key (ninth audit, G10).

Head to head, the opponent may sit at another provider than the model: `--opponent-api-key-env` names
the variable holding its key, `--api-key-env` the model's. The audit's mutant built the opponent's
client with `--api-key-env`, so the rival endpoint was sent the model's key (a secret handed to the
wrong server) and its own key never reached it; the eval tests passed, as they give neither option.

The real CLI's `main` in-process, Nim in self-play from the TextArena example, two stand-in endpoints on
loopback that record the headers of every request; one task, one sample: the model plays seat 0 and
the opponent seat 1.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]

pytest.importorskip("beyondagent_plugin_textarena")


def take_one(body: dict[str, Any]) -> str:
    """A Nim player: one object from the first pile that has some."""
    board = body["messages"][-1]["content"].rsplit("Current Pile:", 1)[-1]
    sizes = [int(n) for n in re.findall(r"pile \d+: (\d+)", board)] or [1]
    return f"[{next(i for i, n in enumerate(sizes) if n)} 1]"


def test_the_opponent_endpoint_gets_the_key_its_own_option_names(openai_server: Any, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from beyondagent_core import cli
    from beyondagent_core.testing.openai_server import ScriptedOpenAIServer

    openai_server.responder = take_one
    monkeypatch.setenv("BEYONDAGENT_PLUGINS", "textarena,mixers,torch,advantages")
    monkeypatch.delenv("BEYONDAGENT_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.setenv("AUDIT9_MODEL_KEY", "model-key-4411")
    monkeypatch.setenv("AUDIT9_RIVAL_KEY", "rival-key-8822")
    monkeypatch.chdir(tmp_path)
    with ScriptedOpenAIServer(take_one) as rival:
        command = ["eval",
                   str(ROOT / "examples" / "selfplay_tictactoe.yaml"), f"run.output_dir={tmp_path / 'runs'}",
                   "tasks.val.game=nim", "tasks.val.opponent=null", "tasks.val.count=1", "workflow.max_turns=20",
                   "--model", "policy", "--base-url", openai_server.base_url, "--api-key-env", "AUDIT9_MODEL_KEY",
                   "--opponent-model", "earlier", "--opponent-base-url", rival.base_url,
                   "--opponent-api-key-env", "AUDIT9_RIVAL_KEY", "--k", "1", "--out", str(tmp_path / "eval")]
        code = cli.main(command)
        assert code == 0, capsys.readouterr().err[-3000:]
        keys = {name: {headers.get("authorization") for headers in server.headers}
                for name, server in (("model", openai_server), ("rival", rival))}
    lines = [json.loads(line) for line in (tmp_path / "eval" / "episodes.jsonl").read_text().splitlines()]
    assert len(lines) == 1 and lines[0]["opponent_seats"]  # the opponent played: its endpoint was asked
    assert keys == {"model": {"Bearer model-key-4411"}, "rival": {"Bearer rival-key-8822"}}
