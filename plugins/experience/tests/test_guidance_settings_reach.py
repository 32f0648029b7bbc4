"""Every `experience` key that `runtime.guidance.Guidance` reads changes what a rollout is given, on the real store.

Class-wide checks after the eighth audit (its part A), each with a value other than the default and
at the limits:

- `k`: how many lessons a guided training rollout, a single `guide(...)` rollout and a scored
  (validation) rollout are shown — exactly `k`, and all there are when the store holds fewer;
- `mode`, `ratio`, `prefix_ratio`: how many rollouts of a group are guided and how many start from
  a stored success (a table of group sizes and ratios, the rounding included);
- `prefix_fraction`: how many turns of the stored success are replayed (one at least, never all);
  a stored success of exactly two turns is a prefix, one of a single turn is not;
- `summarize_every`: new lessons are learned on the steps that are multiples of it, and only there;
- `val_mode`: `woexp` shows nothing at validation however much the store holds; `all` never shows
  a record learned on the scored task, on a synthetic task seeded from it, or on its seed task;
- the metrics: per-group averages and the success of guided, prefixed and plain rollouts apart.

The store is the real sqlite store (`hindsight` summaries of real `Trajectory` records, BM25
retrieval); no LLM is involved.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from beyondagent_plugin_experience.store import SqliteExperienceStore

from beyondagent_core.experience import Experience, ExperienceBlock, same_task
from beyondagent_core.runtime.guidance import Guidance, Guide, GuidedLLM, PrefixLLM
from beyondagent_core.types import Reward, Task, Trajectory, Turn

pytestmark = pytest.mark.beyondagent_plugins("experience")

QUERY = "drive the taxi to the hotel"
TASK = Task(task_id="taxi-0", query=QUERY)


def block(**keys) -> ExperienceBlock:
    return ExperienceBlock(name="experience", **keys)


@pytest.fixture
def store(tmp_path: Path) -> SqliteExperienceStore:
    store = SqliteExperienceStore(path=tmp_path / "lessons.sqlite", run_name="r")
    yield store
    store.close()


def lessons(count: int) -> list[Experience]:
    """`count` lessons of other taxi tasks, each sharing words with `QUERY`."""
    return [Experience(text=f"Lesson {n}: drive the taxi along road {n} to reach the hotel.", task_id=f"taxi-{n + 1}",
                       query=f"drive the taxi to hotel {n}") for n in range(count)]


# --- k ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("k", "held", "shown"), [(1, 6, 1), (5, 6, 5), (6, 6, 6), (7, 6, 6)])
def test_k_is_how_many_lessons_every_kind_of_guided_rollout_is_shown(store, k: int, held: int, shown: int) -> None:
    store.add(lessons(held))
    guidance = Guidance(block(mode="all", k=k, val_mode="all"), store)
    guides = guidance.guides([TASK], 2, seed=("run", 0))
    assert [len(g.experiences) for g in guides] == [shown, shown]
    assert guidance.retrieved_per_group == [shown]
    assert len(guidance.guide(TASK, 2, 1, seed=("run", 0)).experiences) == shown
    (val,) = guidance.val_guides([TASK])
    assert len(val.experiences) == shown


def test_the_default_k_is_three(store) -> None:
    store.add(lessons(6))
    assert ExperienceBlock().k == 3
    (guide,) = Guidance(block(mode="all"), store).guides([TASK], 1, seed=0)
    assert len(guide.experiences) == 3


# --- mode, ratio, prefix_ratio: how a group is split -------------------------------------------


def success_of(task: Task, actions: list[str]) -> Trajectory:
    turns = [Turn("user", f"start of {task.task_id}")]
    for action in actions:
        turns += [Turn("assistant", action, token_ids=[1]), Turn("user", f"after {action}")]
    return Trajectory(task=task, turns=turns, reward=Reward(score=1.0, success=True))


def hold_a_success(store: SqliteExperienceStore, task: Task, actions: list[str]) -> None:
    assert store.add(asyncio.run(store.summarize([success_of(task, actions)], step=1))) == 1


@pytest.mark.parametrize(("mode", "ratio", "prefix_ratio", "group", "guided", "prefixed"), [
    ("woexp", 0.5, 0.0, 4, 0, 0),
    ("woexp", 0.5, 0.25, 4, 0, 1),
    ("woexp", 0.5, 1.0, 4, 0, 4),
    ("mixed", 0.0, 0.0, 4, 0, 0),
    ("mixed", 0.25, 0.0, 4, 1, 0),
    ("mixed", 0.5, 0.0, 5, 2, 0),  # round(2.5) is 2
    ("mixed", 0.3, 0.0, 5, 2, 0),  # round(1.5) is 2
    ("mixed", 1.0, 0.0, 3, 3, 0),
    ("mixed", 0.25, 0.5, 8, 2, 4),
    ("mixed", 0.25, 0.75, 4, 1, 3),  # ratio + prefix_ratio exactly 1: no plain rollout
    ("all", 0.25, 0.0, 4, 4, 0),
])
def test_mode_ratio_and_prefix_ratio_split_each_group(store, mode: str, ratio: float, prefix_ratio: float,
                                                      group: int, guided: int, prefixed: int) -> None:
    hold_a_success(store, TASK, ["north", "east", "pickup", "dropoff"])
    hold_a_success(store, TASK, ["south", "west", "pickup", "dropoff"])  # which one a rollout replays is drawn
    guidance = Guidance(block(mode=mode, ratio=ratio, prefix_ratio=prefix_ratio), store)
    for seed in range(2):
        guides = guidance.guides([TASK], group, seed=("run", seed))
        assert len(guides) == group
        assert sum(1 for g in guides if g is not None and g.guided) == guided
        assert sum(1 for g in guides if g is not None and g.prefixed) == prefixed
        single = [guidance.guide(TASK, group, rollout, seed=(("run", seed), 0, TASK.task_id))
                  for rollout in range(group)]
        assert single == guides  # one rollout at a time (verl's workers) gets what the batch gets


# --- prefix_fraction and the two-turn limit ----------------------------------------------------


@pytest.mark.parametrize(("fraction", "replayed"), [(0.1, 1), (0.625, 2), (0.75, 3), (1.0, 3)])
def test_prefix_fraction_is_how_much_of_the_stored_success_is_replayed(store, fraction: float, replayed: int) -> None:
    hold_a_success(store, TASK, ["north", "east", "pickup", "dropoff"])
    guidance = Guidance(block(mode="woexp", prefix_ratio=1.0, prefix_fraction=fraction), store)
    guides = guidance.guides([TASK], 2, seed=("run", 1))
    assert [[t["content"] for t in g.prefix] for g in guides] == [["north", "east", "pickup"][:replayed]] * 2
    assert all(g.prefix_source == store.examples_of(TASK)[0].experience_id and not g.guided for g in guides)


@pytest.mark.parametrize(("actions", "prefix"), [(["north"], None), (["north", "east"], ["north"]),
                                                 (["north", "east", "pickup"], ["north", "east"])])
def test_a_stored_success_of_two_turns_is_a_prefix_and_one_of_a_single_turn_is_not(
        store, actions: list[str], prefix: list[str] | None) -> None:
    hold_a_success(store, TASK, actions)
    guide = Guidance(block(mode="woexp", prefix_ratio=1.0, prefix_fraction=1.0), store).prefix_guide(TASK, seed=0)
    assert (None if guide is None else [t["content"] for t in guide.prefix]) == prefix


def test_a_prefix_comes_from_the_same_task_id_or_the_same_problem_only(store) -> None:
    hold_a_success(store, Task(task_id=TASK.task_id, query="an older wording of the task"), ["north", "east"])
    hold_a_success(store, Task(task_id="taxi-copy", query=QUERY), ["south", "west"])  # the same problem, another id
    hold_a_success(store, Task(task_id="taxi-9", query="another problem"), ["up", "down"])
    guidance = Guidance(block(mode="woexp", prefix_ratio=1.0), store)
    replayed = {guidance.prefix_guide(TASK, seed=seed).prefix[0]["content"] for seed in range(12)}
    assert replayed == {"north", "south"}


def test_a_record_whose_turns_are_malformed_is_never_replayed(store) -> None:
    store.add([Experience(text="Broken turns.", task_id=TASK.task_id, metadata={"turns": [{"content": 3}] * 3}),
               Experience(text="Turns not a list.", task_id=TASK.task_id, metadata={"turns": "north east"})])
    guidance = Guidance(block(mode="woexp", prefix_ratio=1.0), store)
    assert guidance.guides([TASK], 2, seed=0) == [None, None]


def test_a_prefix_replays_before_the_policy_and_a_prefix_wins_over_lessons() -> None:
    class Policy:  # the model behind the wrappers: records what it is asked
        def __init__(self) -> None:
            self.asked: list[list[dict]] = []

        async def chat(self, messages, **sampling) -> Turn:
            self.asked.append([dict(m) for m in messages])
            return Turn("assistant", "policy move")

    policy = Policy()
    lesson = Experience(text="Go north first.")
    both = Guide(experiences=(lesson,), prefix=({"content": "north"},))
    llm = both.wrap(policy)
    assert isinstance(llm, PrefixLLM)  # never both: the prefix-started rollout shows no lesson

    async def two_calls() -> list[str]:
        return [(await llm.chat([{"role": "user", "content": "start"}])).content for _ in range(2)]

    assert asyncio.run(two_calls()) == ["north", "policy move"] and llm.replayed == 1
    assert policy.asked == [[{"role": "user", "content": "start"}]]  # the replayed turn never reached it
    assert isinstance(Guide(experiences=(lesson,)).wrap(policy), GuidedLLM) and Guide().wrap(policy) is policy
    with pytest.raises(RuntimeError, match="set experience.prefix_ratio: 0"):
        llm.gateway_episode()


def test_the_lessons_stay_in_the_message_they_were_first_put_in() -> None:
    guided = GuidedLLM(None, [Experience(text="Go north first.")])
    assert guided.inject([]) == []
    first = guided.inject([{"role": "system", "content": "rules"}, {"role": "user", "content": "start"}])
    later = guided.inject([{"role": "system", "content": "rules"}, {"role": "user", "content": "start"},
                           {"role": "assistant", "content": "north"}, {"role": "user", "content": "moved"}])
    assert first[1]["content"].endswith("\n\nstart") and "Go north first." in first[1]["content"]
    assert later[1] == first[1] and later[3] == {"role": "user", "content": "moved"}


# --- summarize_every ---------------------------------------------------------------------------


@pytest.mark.parametrize(("every", "learning_steps"), [(1, [1, 2, 3, 4, 5, 6]), (3, [3, 6]), (7, [])])
def test_summarize_every_learns_on_its_multiples_only(store, every: int, learning_steps: list[int]) -> None:
    guidance = Guidance(block(summarize_every=every), store)
    learned = []
    for step in range(1, 7):  # a new success each step: each summary is a new lesson
        added = asyncio.run(guidance.learn([success_of(TASK, ["north"] * step + ["dropoff"])], step))
        if added:
            learned.append(step)
    assert learned == learning_steps
    assert [e.step for e in store.all()] == learning_steps


# --- val_mode and the records a scored rollout is never shown ---------------------------------


SEED = Task(task_id="taxi-7", query="drive the taxi to the hotel from the station")
OF_SEED = Task(task_id="taxi-7/goal-a1", query="drive the taxi to the hotel door", origin="synthetic",
               seed_task_id="taxi-7")
SIBLING = Task(task_id="taxi-7/goal-b2", query="drive the taxi to the hotel garage", origin="synthetic",
               seed_task_id="taxi-7")
OTHER = Task(task_id="taxi-8", query="drive the taxi to the hotel from the airport")


@pytest.fixture
def learned_on_seed_family(store) -> SqliteExperienceStore:
    """Successes of the seed task, of a synthetic task seeded from it and of another seed, as the store keeps them."""
    for task, actions in ((SEED, ["west", "dropoff"]), (OF_SEED, ["north", "dropoff"]), (OTHER, ["east", "dropoff"])):
        hold_a_success(store, task, actions)
    return store


@pytest.mark.parametrize("scored", [SEED, OF_SEED, SIBLING])
def test_validation_never_shows_a_record_of_the_scored_task_or_its_seed_family(learned_on_seed_family,
                                                                               scored: Task) -> None:
    store = learned_on_seed_family
    assert sum(same_task(e, scored) for e in store.retrieve(scored, 3)) >= 1  # training may see them
    guidance = Guidance(block(mode="all", k=3, val_mode="all"), store)
    (guide,) = guidance.val_guides([scored])
    assert [e.task_id for e in guide.experiences] == [OTHER.task_id]
    assert guidance.val_metrics([guide])["experience/val_leaks_blocked"] == 0.0  # the store left them out itself
    (training,) = guidance.guides([scored], 1, seed=0)
    assert OTHER.task_id in {e.task_id for e in training.experiences} and len(training.experiences) == 3


def test_val_mode_woexp_shows_nothing_however_much_the_store_holds(learned_on_seed_family) -> None:
    guidance = Guidance(block(mode="all", k=3), learned_on_seed_family)
    assert ExperienceBlock().val_mode == "woexp"
    assert guidance.val_guides([OTHER, SEED], samples=3) == [None] * 6
    assert guidance.val_metrics([None] * 6) == {}


def test_val_mode_all_gives_every_sample_of_a_task_the_same_lessons(learned_on_seed_family) -> None:
    guidance = Guidance(block(val_mode="all", k=2), learned_on_seed_family)
    guides = guidance.val_guides([SEED, Task(task_id="chess-1", query="win the chess game")], samples=3)
    assert len(guides) == 6 and guides[0] == guides[1] == guides[2] is not None and guides[3:] == [None] * 3
    metrics = guidance.val_metrics(guides)
    assert metrics == {"experience/val_guided_fraction": 0.5, "experience/val_leaks_blocked": 0.0}


# --- metrics -----------------------------------------------------------------------------------


def test_the_metrics_average_over_groups_and_split_success_by_how_a_rollout_started(store) -> None:
    store.add(lessons(2))
    guidance = Guidance(block(mode="mixed", ratio=0.25, prefix_ratio=0.5), store)
    metrics = guidance.metrics(guided=[True, False, False, False, True, False, False, False],
                               success=[True, True, False, False, False, True, True, True],
                               added=3, retrieved_per_group=[2, 0, 1, 1],
                               prefixed=[0, 2, 3, 0, 0, 0, 1, 0])
    assert metrics == {"experience/added": 3.0, "experience/retrieved_per_group": 1.0, "experience/hit_rate": 0.75,
                       "experience/guided_fraction": 0.25, "experience/prefixed_fraction": 0.375,
                       "experience/prefix_turns": 2.0, "experience/total": 2.0,
                       "train/success_rate_guided": 0.5, "train/success_rate_prefixed": 2 / 3,
                       "train/success_rate_unguided": 2 / 3}
    plain = Guidance(block(mode="mixed", ratio=0.5), store).metrics([True, False], [True, False], 0, [0])
    assert "experience/prefixed_fraction" not in plain and "train/success_rate_prefixed" not in plain
    assert (plain["experience/hit_rate"], plain["train/success_rate_unguided"]) == (0.0, 0.0)


def test_validation_counts_the_leaks_blocked_since_the_step_began() -> None:
    own = Experience(text="Go west, then drop off.", task_id=SEED.task_id)
    other = Experience(text="Go east, then drop off.", task_id=OTHER.task_id)

    class ReturnsEverything:  # a third party's store whose retrieve predates exclude_own
        def retrieve(self, task: Task, k: int) -> list[Experience]:
            return [own, other][:k]

    guidance = Guidance(block(val_mode="all", k=2), ReturnsEverything())
    guidance.val_guides([SEED, SEED])
    before = guidance.leaks_blocked
    guides = guidance.val_guides([SEED, OTHER])
    assert before == 2 and guidance.leaks_blocked == 4
    assert guidance.val_metrics(guides, leaks_before=before)["experience/val_leaks_blocked"] == 2.0
    assert [e.task_id for e in guides[0].experiences] == [OTHER.task_id]
    assert [e.task_id for e in guides[1].experiences] == [SEED.task_id]  # scoring OTHER: SEED's record is fine
