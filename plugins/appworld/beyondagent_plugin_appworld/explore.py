"""Exploring AppWorld without an LLM: the env's valid actions and the goals they achieve.

`valid_actions()` offers read-only code actions that depend on what the episode has done so
far: read the supervisor's passwords, log in to Spotify or Venmo, list the Spotify playlists,
open one playlist, read the Venmo balance. Each prints one `@@fact {...}` line with what it
found, which the env reads back (the world's own data, through its own APIs).

`describe_achieved()` turns the facts seen so far into questions with a known answer ("How
many songs are in my Spotify playlist "Focus"?" -> 6). The `hindsight` summarizer makes each
one a synthetic task on the seed task's world, `metadata["goal"] = {"kind", "answer", ...}`;
the env grades such a task itself: the episode must end with
`apis.supervisor.complete_task(answer=...)` and the answer must match (no LLM judge needed).
"""

from __future__ import annotations

import json
from typing import Any

FACT = "@@fact "

PASSWORDS = '''
passwords = {p["account_name"]: p["password"] for p in apis.supervisor.show_account_passwords()}
profile = apis.supervisor.show_profile()
print("@@fact " + json.dumps({"kind": "passwords", "accounts": sorted(passwords)}))
'''

LOGIN = '''
{app}_token = apis.{app}.login(username=profile["email"], password=passwords["{app}"])["access_token"]
print("@@fact " + json.dumps({{"kind": "login", "app": "{app}"}}))
'''

PLAYLISTS = '''
spotify_playlists, page = [], 0
while True:
    batch = apis.spotify.show_playlist_library(access_token=spotify_token, page_index=page, page_limit=20)
    if not batch:
        break
    spotify_playlists += batch
    page += 1
print("@@fact " + json.dumps({"kind": "spotify_playlists",
                              "playlists": [[p["playlist_id"], p["title"]] for p in spotify_playlists]}))
'''

PLAYLIST = '''
playlist = apis.spotify.show_playlist(access_token=spotify_token, playlist_id={playlist_id})
print("@@fact " + json.dumps({{"kind": "spotify_playlist", "playlist_id": {playlist_id}, "title": playlist["title"],
                               "songs": [song["title"] for song in playlist["songs"]]}}))
'''

VENMO_BALANCE = '''
balance = apis.venmo.show_venmo_balance(access_token=venmo_token)["venmo_balance"]
print("@@fact " + json.dumps({"kind": "venmo_balance", "balance": balance}))
'''


def as_action(code: str) -> str:
    return f"```python\n{code.strip()}\n```"


def read_facts(output: str) -> list[dict[str, Any]]:
    """The `@@fact` lines of an action's output."""
    facts = []
    for line in output.splitlines():
        if line.startswith(FACT):
            try:
                fact = json.loads(line[len(FACT):])
            except ValueError:
                continue
            if isinstance(fact, dict) and "kind" in fact:
                facts.append(fact)
    return facts


class Explorer:
    """What one episode has found out, and the actions that can find out more."""

    def __init__(self) -> None:
        self.facts: dict[str, dict[str, Any]] = {}

    def key(self, fact: dict[str, Any]) -> str:
        if fact["kind"] == "login":
            return f"login:{fact['app']}"
        if fact["kind"] == "spotify_playlist":
            return f"spotify_playlist:{fact['playlist_id']}"
        return fact["kind"]

    def record(self, output: str) -> None:
        for fact in read_facts(output):
            self.facts[self.key(fact)] = fact

    def actions(self) -> list[str]:
        """Code actions (fenced) valid now; none repeats a fact already found."""
        codes: list[str] = []
        if "passwords" not in self.facts:
            return [as_action(PASSWORDS)]
        accounts = set(self.facts["passwords"].get("accounts", []))
        for app in ("spotify", "venmo"):
            if app in accounts and f"login:{app}" not in self.facts:
                codes.append(LOGIN.format(app=app))
        if "login:spotify" in self.facts:
            if "spotify_playlists" not in self.facts:
                codes.append(PLAYLISTS)
            else:
                for playlist_id, _ in self.facts["spotify_playlists"]["playlists"]:
                    if f"spotify_playlist:{playlist_id}" not in self.facts:
                        codes.append(PLAYLIST.format(playlist_id=int(playlist_id)))
        if "login:venmo" in self.facts and "venmo_balance" not in self.facts:
            codes.append(VENMO_BALANCE)
        return [as_action(code) for code in codes]

    def goals(self) -> list[dict[str, Any]]:
        """Questions the facts found so far answer: `[{"query", "goal"}]`."""
        goals = []
        for fact in self.facts.values():
            if fact["kind"] == "spotify_playlists":
                goals.append({"query": "How many playlists do I have in my Spotify library?",
                              "goal": {"kind": "spotify_playlist_count", "answer": len(fact["playlists"])}})
            elif fact["kind"] == "spotify_playlist":
                goals.append({"query": f"How many songs are in my Spotify playlist \"{fact['title']}\"?",
                              "goal": {"kind": "spotify_playlist_size", "playlist": fact["title"],
                                       "answer": len(fact["songs"])}})
            elif fact["kind"] == "venmo_balance":
                goals.append({"query": "What is my current Venmo balance? Answer with the number only.",
                              "goal": {"kind": "venmo_balance", "answer": fact["balance"]}})
        return goals


def check_goal(goal: Any) -> dict[str, Any]:
    """A task's `metadata["goal"]`, checked: a dict with a known `kind` and an `answer`."""
    kinds = ("spotify_playlist_count", "spotify_playlist_size", "venmo_balance")
    if not isinstance(goal, dict) or goal.get("kind") not in kinds or "answer" not in goal:
        raise ValueError(f"an AppWorld goal is {{'kind': one of {', '.join(kinds)}, 'answer': ...}}, got {goal!r:.120}")
    return goal


def same_answer(given: Any, expected: Any) -> bool:
    """Answers compared as AppWorld's `test.answer` compares them: as normalized text."""
    def text(value: Any) -> str:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        return str(value).strip().lower().rstrip(".")

    return given is not None and text(given) == text(expected)
