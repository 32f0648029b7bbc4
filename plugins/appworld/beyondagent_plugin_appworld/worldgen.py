"""Generate a small but real AppWorld data directory from the `appworld` package's public API.

AppWorld's downloaded data (its 750 tasks and their databases) cannot be fetched everywhere and
may be redistributed only encrypted, so tests and demos build their own world here:

- every app's database is created from the package's own models (`ModelCollection`), with a
  supervisor (`admin.MainUser`, `supervisor.Supervisor` with the account passwords), other
  users, and a Spotify library (artists, songs, playlists) and a Venmo account made with the
  apps' own model factories; `supervisor.Task` holds the task's instruction;
- `api_docs` (the app the agent discovers APIs with) is filled from the package's doc
  preparation (`prepare_api_docs`), and `data/api_docs/standard/*.json` from `ApiDocCollection`;
- each task is saved with AppWorld's own `Task.save` (`specs.json`, `dbs/` in the full format)
  and a `GroundTruth` whose `evaluation.py` checks the answer or the database change against the
  generated data (and that nothing else changed), so `evaluate_task` grades it like a real task;
- `data/datasets/{train,dev,test_normal,test_challenge}.txt` list the task ids.

This module runs in the AppWorld venv (it imports `appworld`, which pins pydantic 1), never in
the main one: `beyondagent appworld generate` runs it there as `python -m
beyondagent_plugin_appworld.worldgen --tasks N --out DIR`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from datetime import datetime
from pathlib import Path
from textwrap import dedent
from typing import Any

SPLITS = ("train", "dev", "test_normal", "test_challenge")
KINDS = ("most_songs_playlist", "playlist_count", "add_song_to_playlist", "venmo_balance")
GENRES = ("pop", "rock", "jazz", "hip-hop", "classical", "country", "electronic")


def _task_id(index: int) -> str:
    # AppWorld's ids are `<generator>_<number>`; ours say where they come from.
    return f"gen{index:04d}a_1"


# --- evaluation code written into each task's ground truth -----------------------------------

ANSWER_EVALUATION = dedent('''
    import json


    def evaluate(test, public_data, private_data, main_user, models, ground_truth_answer):
        with test("the task is marked complete through apis.supervisor.complete_task"):
            task = models.end.supervisor.Task.first()
            test.case(task.status, "==", "success")
        with test("the answer given to complete_task is the right one"):
            answer = json.loads(models.end.supervisor.Task.first().answer)
            test.answer(answer, ground_truth_answer)
        with test("no data other than the supervisor's task record was changed"):
            # logging in updates the app's `User.last_logged_in`: that is not a change the task made
            test.case(models.changed_model_names(ignore=["supervisor.Task", "spotify.User", "venmo.User"]), "==", set())
''')

ADD_SONG_EVALUATION = dedent('''
    def evaluate(test, public_data, private_data, main_user, models, ground_truth_answer):
        with test("the task is marked complete through apis.supervisor.complete_task"):
            task = models.end.supervisor.Task.first()
            test.case(task.status, "==", "success")
        with test("the song is now in the playlist"):
            test.case(models.end.spotify.PlaylistSong.exists(
                playlist_id=private_data.playlist_id, song_id=private_data.song_id) is not None, "==", True)
        with test("exactly one song was added to that playlist and none removed"):
            added, updated, removed = models.changed_records("spotify.PlaylistSong")
            test.case([(r.playlist_id, r.song_id) for r in added], "==",
                      [(private_data.playlist_id, private_data.song_id)])
            test.case(len(removed), "==", 0)
        with test("no other data was changed"):
            test.case(models.changed_model_names(
                ignore=["supervisor.Task", "spotify.PlaylistSong", "spotify.User", "venmo.User"]), "==", set())
''')


def _answer_solution(body: str) -> str:
    return "def solution(apis, requester):\n" + "\n".join("    " + line for line in body.strip().splitlines()) + "\n"


SPOTIFY_LOGIN = '''
passwords = {p["account_name"]: p["password"] for p in apis.supervisor.show_account_passwords()}
profile = apis.supervisor.show_profile()
token = apis.spotify.login(username=profile["email"], password=passwords["spotify"])["access_token"]
playlists, page = [], 0
while True:
    batch = apis.spotify.show_playlist_library(access_token=token, page_index=page, page_limit=20)
    if not batch:
        break
    playlists += batch
    page += 1
'''


# --- building one task's world ----------------------------------------------------------------

class WorldBuilder:
    """Fills one task's databases (all apps, in memory) and returns what the task needs."""

    def __init__(self, index: int, seed: int):
        from appworld.apps import get_all_apps
        from appworld.collections.models import ModelCollection
        from appworld.common.random import set_random_seed

        self.index = index
        self.rng = random.Random(seed * 1000 + index)
        set_random_seed(seed * 1000 + index, python=True, faker_=True, model_factory=True)
        self.home = f":memory:generate-{index}"
        self.models = ModelCollection.load(to_db_home_path=self.home, from_db_home_path=self.home,
                                           load_apps=get_all_apps(), create_db=True)

    def build(self, kind: str) -> dict[str, Any]:
        mc = self.models
        supervisor = self._save(mc.admin.MainUser.factory().build())
        others = [self._save(mc.admin.MainUser.factory().build()) for _ in range(3)]
        passwords = {app: f"pw-{app}-{self.rng.randrange(10**6):06d}" for app in ("spotify", "venmo")}
        sup = mc.supervisor.Supervisor.create_save(
            first_name=supervisor.first_name, last_name=supervisor.last_name, email=supervisor.email,
            phone_number=supervisor.phone_number, birthday=supervisor.birthday, sex=supervisor.sex)
        for app, password in passwords.items():
            mc.supervisor.AccountPassword.create_save(supervisor_id=sup.id, account_name=app, password=password)
        self._api_docs()
        library = self._spotify(supervisor, others, passwords["spotify"])
        venmo_balance = self._venmo(supervisor, others, passwords["venmo"])
        task = self._task(kind, library, venmo_balance)
        mc.supervisor.Task.create_save(supervisor_id=sup.id, instruction=task["instruction"])
        task["supervisor"] = supervisor
        return task

    def _save(self, record: Any) -> Any:
        record.save()
        return record

    def _api_docs(self) -> None:
        from appworld.api_docs import prepare_api_docs
        from appworld.apps import get_all_apps

        docs = []
        for app in get_all_apps(skip_admin=True):
            for doc in prepare_api_docs(app, include_private_apis=False):
                doc = dict(doc)
                doc["app_name_"] = doc.pop("app_name")
                docs.append(self.models.api_docs.ApiDoc(**doc))
        self.models.api_docs.ApiDoc.save_all(docs)

    def _spotify(self, supervisor: Any, others: list[Any], password: str) -> dict[str, Any]:
        spotify = self.models.spotify
        owner = spotify.User.factory().build(first_name=supervisor.first_name, last_name=supervisor.last_name,
                                             email=supervisor.email, password=password, verified=True)
        owner.save()
        users = [owner]
        for other in others:
            user = spotify.User.factory().build(first_name=other.first_name, last_name=other.last_name,
                                                email=other.email, verified=True)
            user.save()
            users.append(user)
        artists = [spotify.Artist.create_save(name=f"{name} Band {self.index}", genre=self.rng.choice(GENRES))
                   for name in ("North", "Velvet", "Copper", "Neon")]
        words = ["Morning", "River", "Static", "Golden", "Echo", "Paper", "Glass", "Summer", "Signal", "Harbor",
                 "Quiet", "Electric", "Midnight", "Shadow", "Silver", "Wild", "Lantern", "Ocean", "Ember", "Drift"]
        titles = sorted({f"{a} {b}" for a in words for b in words if a != b})
        self.rng.shuffle(titles)
        songs = []
        for title in titles[:24]:
            artist = self.rng.choice(artists)
            songs.append(spotify.Song.factory().build(
                title=title, artist_ids=[artist.id], album_id=None, genre=artist.genre,
                duration=self.rng.randint(120, 420), play_count=self.rng.randint(0, 5000),
                rating=round(self.rng.uniform(1, 5), 1), like_count=0, review_count=0))
        spotify.Song.save_all(songs)
        playlist_names = ["Road Trip", "Focus", "Workout", "Sunday Chill", "Party Mix", "Late Night", "Throwbacks"]
        self.rng.shuffle(playlist_names)
        count = self.rng.randint(3, 5)
        sizes = self.rng.sample(range(2, 9), count)  # distinct sizes: one playlist has the most songs
        playlists = []
        for name, size in zip(playlist_names[:count], sizes):
            playlist = spotify.Playlist.factory().build(title=name, user_id=owner.id, is_public=False,
                                                        rating=0, like_count=0, review_count=0)
            playlist.save()
            members = self.rng.sample(songs, size)
            spotify.PlaylistSong.save_all([spotify.PlaylistSong.factory().build(playlist_id=playlist.id, song_id=s.id)
                                           for s in members])
            playlists.append({"id": playlist.id, "title": name, "song_ids": [s.id for s in members]})
        for user in users[1:]:  # other users' playlists: not the supervisor's
            playlist = spotify.Playlist.factory().build(title=f"{user.first_name}'s Mix", user_id=user.id,
                                                        is_public=True, rating=0, like_count=0, review_count=0)
            playlist.save()
            members = self.rng.sample(songs, 9)
            spotify.PlaylistSong.save_all([spotify.PlaylistSong.factory().build(playlist_id=playlist.id, song_id=s.id)
                                           for s in members])
        return {"playlists": playlists, "songs": [{"id": s.id, "title": s.title} for s in songs]}

    def _venmo(self, supervisor: Any, others: list[Any], password: str) -> float:
        venmo = self.models.venmo
        balance = float(self.rng.randint(50, 5000))
        venmo.User.factory().build(first_name=supervisor.first_name, last_name=supervisor.last_name,
                                   email=supervisor.email, password=password, verified=True,
                                   venmo_balance=balance).save()
        for other in others:
            venmo.User.factory().build(first_name=other.first_name, last_name=other.last_name,
                                       email=other.email, verified=True).save()
        return balance

    def _task(self, kind: str, library: dict[str, Any], venmo_balance: float) -> dict[str, Any]:
        playlists = library["playlists"]
        if kind == "most_songs_playlist":
            biggest = max(playlists, key=lambda p: len(p["song_ids"]))
            return {"instruction": "How many songs are in the Spotify playlist of mine that has the most songs?",
                    "answer": len(biggest["song_ids"]), "evaluation": ANSWER_EVALUATION, "private": {},
                    "solution": _answer_solution(SPOTIFY_LOGIN + '''
sizes = [len(apis.spotify.show_playlist(access_token=token, playlist_id=p["playlist_id"])["songs"]) for p in playlists]
apis.supervisor.complete_task(answer=max(sizes))
''')}
        if kind == "playlist_count":
            return {"instruction": "How many playlists do I have in my Spotify library?",
                    "answer": len(playlists), "evaluation": ANSWER_EVALUATION, "private": {},
                    "solution": _answer_solution(SPOTIFY_LOGIN + '''
apis.supervisor.complete_task(answer=len(playlists))
''')}
        if kind == "add_song_to_playlist":
            playlist = self.rng.choice(playlists)
            song = self.rng.choice([s for s in library["songs"] if s["id"] not in playlist["song_ids"]])
            return {"instruction": f"Add the song \"{song['title']}\" to my Spotify playlist \"{playlist['title']}\".",
                    "answer": None, "evaluation": ADD_SONG_EVALUATION,
                    "private": {"playlist_id": playlist["id"], "song_id": song["id"]},
                    "solution": _answer_solution(SPOTIFY_LOGIN + f'''
playlist = next(p for p in playlists if p["title"] == {playlist['title']!r})
song = apis.spotify.search_songs(query={song['title']!r})[0]
apis.spotify.add_song_to_playlist(access_token=token, playlist_id=playlist["playlist_id"], song_id=song["song_id"])
apis.supervisor.complete_task()
''')}
        if kind == "venmo_balance":
            return {"instruction": "What is my current Venmo balance? Answer with the number only.",
                    "answer": venmo_balance, "evaluation": ANSWER_EVALUATION, "private": {},
                    "solution": _answer_solution('''
passwords = {p["account_name"]: p["password"] for p in apis.supervisor.show_account_passwords()}
profile = apis.supervisor.show_profile()
token = apis.venmo.login(username=profile["email"], password=passwords["venmo"])["access_token"]
apis.supervisor.complete_task(answer=apis.venmo.show_venmo_balance(access_token=token)["venmo_balance"])
''')}
        raise ValueError(f"unknown task kind {kind!r}; known: {', '.join(KINDS)}")


# --- the whole data directory -----------------------------------------------------------------

def generate(out: Path, tasks: int, seed: int = 0, log: Any = print) -> dict[str, Any]:
    """Write `out/data` with `tasks` generated tasks; returns a summary (ids per split, seconds)."""
    out = out.resolve()
    os.environ["APPWORLD_ROOT"] = str(out)
    from appworld import update_root
    from appworld.apps.admin.models import MainUserMunch
    from appworld.collections.api_docs import ApiDocCollection
    from appworld.common.constants import CANARY_STRING, DB_VERSION
    from appworld.task import Task

    update_root(str(out))
    started = time.monotonic()
    (out / "data").mkdir(parents=True, exist_ok=True)
    _save_api_docs(out, ApiDocCollection.build(), CANARY_STRING)
    ids: list[str] = []
    for index in range(tasks):
        task_started = time.monotonic()
        kind = KINDS[index % len(KINDS)]
        task_id = _task_id(index)
        built = WorldBuilder(index, seed)
        spec = built.build(kind)
        supervisor = spec["supervisor"]
        task = Task(
            id=task_id, instruction=spec["instruction"],
            supervisor=MainUserMunch(first_name=supervisor.first_name, last_name=supervisor.last_name,
                                     email=supervisor.email, phone_number=supervisor.phone_number),
            datetime=datetime(2023, 5, 18, 12, 0, 0), allowed_apps=_allowed_apps(), db_version=DB_VERSION,
            model_collection=built.models)
        task.save(delete_if_exists=True, save_ground_truth=False, model_collection_format="full")
        _save_ground_truth(out / "data" / "tasks" / task_id / "ground_truth", spec, kind, CANARY_STRING)
        built.models.close()
        ids.append(task_id)
        log(f"task {task_id} ({kind}) in {time.monotonic() - task_started:.1f}s")
    splits = _split(ids)
    datasets = out / "data" / "datasets"
    datasets.mkdir(parents=True, exist_ok=True)
    for split, split_ids in splits.items():
        (datasets / f"{split}.txt").write_text("".join(f"{task_id}\n" for task_id in split_ids))
    summary = {"root": str(out), "tasks": len(ids), "splits": {k: len(v) for k, v in splits.items()},
               "seconds": round(time.monotonic() - started, 1)}
    (out / "data" / "generated.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def _save_ground_truth(directory: Path, spec: dict[str, Any], kind: str, canary: str) -> None:
    """The files `GroundTruth.load(mode="minimal")` reads (AppWorld's own `save` reformats them
    with ruff, a tool its install leaves out)."""
    directory.mkdir(parents=True, exist_ok=True)
    files = {
        "public_data.json": json.dumps({}),
        "private_data.json": json.dumps(spec["private"]),
        "answer.json": json.dumps(spec["answer"]),
        "test_data.json": json.dumps(None),
        # minimal mode: GroundTruth counts nothing itself, so the counts it wants are given here
        "metadata.json": json.dumps({"mode": "minimal", "difficulty": 1, "num_apps": 1,
                                     "num_apis": spec["solution"].count("apis."),
                                     "num_solution_code_lines": len(spec["solution"].strip().splitlines()) - 1,
                                     "kind": kind, "generated_by": "beyondagent appworld generate"}),
        "evaluation.py": f"# Canary String: {canary}\n{spec['evaluation'].lstrip()}",
        "solution.py": f"# Canary String: {canary}\n{spec['solution'].lstrip()}",
    }
    for name, text in files.items():
        (directory / name).write_text(text + ("" if text.endswith("\n") else "\n"))


def _save_api_docs(out: Path, collection: Any, canary: str) -> None:
    """`data/api_docs/standard/<app>.json`, what `Task.load` reads (AppWorld's own `save` also
    writes the OpenAPI format, which needs a package its install leaves out)."""
    directory = out / "data" / "api_docs" / "standard"
    directory.mkdir(parents=True, exist_ok=True)
    for app_name, api_name_to_docs in collection.items():
        docs = {name: {**doc, "canary_string": canary} for name, doc in api_name_to_docs.items()}
        (directory / f"{app_name}.json").write_text(json.dumps(docs, indent=2) + "\n")


def _allowed_apps() -> list[str]:
    from appworld.apps import get_all_apps

    return get_all_apps(skip_admin=True)


def _split(ids: list[str]) -> dict[str, list[str]]:
    """Every task is in `train`; the last quarter (at least one) is also `dev` and the test splits."""
    held_out = ids[-max(1, len(ids) // 4):]
    return {"train": list(ids), "dev": held_out, "test_normal": held_out, "test_challenge": held_out}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m beyondagent_plugin_appworld.worldgen",
                                     description="Generate a small, real AppWorld data directory.")
    parser.add_argument("--tasks", type=int, default=4)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    summary = generate(args.out, args.tasks, seed=args.seed, log=lambda line: print(line, file=sys.stderr, flush=True))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
