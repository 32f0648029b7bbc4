"""The core runtime at its limits, and the env released on every way out of an episode.

Written after the eighth audit, to catch the next audit's mutants of the same kinds in the same files
(`runtime/react.py`, `runtime/episodes.py`, `runtime/token_chat.py`, `runtime/replay.py`, `failures.py`,
the YAML limits of `spec.py`), each checked exactly on its limit and one past it:

- react: an env that ends the episode on the last allowed turn is `terminated`; every sampling key set
  (a 0.0 temperature included) reaches the model, `max_turns` never does; the config's own bounds;
- the episode runner closes its env when the workflow raises, when the env's `evaluate()` raises and when
  the episode is cancelled (cancelling is no error record: it propagates);
- TokenChat: a response budget used up exactly is refused, one token left gives a one-token turn; which
  endings are "length"; sampling keys it does not take are named; the call's keys override the engine's;
- the failure summary's five causes; a replayed reference's forms; `logging.episodes` from 0 to exactly 1
  (1 keeps every group), its `seed` changing which groups are kept; a group is skipped only when failures
  left it fewer than two finished episodes (exactly two is a baseline; a one-episode group is not skipped);
- a spec nested exactly 32 levels deep (also through an alias) and one holding exactly 100,000 values once
  aliases are expanded are read; one more is refused.

`ScriptedLLM` and `Countdown` (tests/test_runtime.py) stand in for a model and an env, `FixedChat`
(tests/test_audit8_token_chat.py) for an engine, as there.
"""

from __future__ import annotations

import asyncio

import pytest
from test_audit8_token_chat import IM_END, PROMPT, USER_HI, FixedChat, reply
from test_runtime import Countdown, ScriptedLLM, run

from beyondagent_core.advantages import skips_group
from beyondagent_core.checks import MAX_TEMPERATURE, MAX_TOKENS, MAX_TURNS
from beyondagent_core.episode_records import EpisodeSampling, check_sampling
from beyondagent_core.failures import FailureTally
from beyondagent_core.logs import configure_logging
from beyondagent_core.runtime.episodes import EpisodeRunner
from beyondagent_core.runtime.react import ReactConfig, ReactWorkflow
from beyondagent_core.runtime.replay import ReferenceExhausted, ReplayLLM, format_reference, reference_actions
from beyondagent_core.runtime.tokens import ContextLengthExceeded
from beyondagent_core.spec import SPEC_MAX_DEPTH, SPEC_MAX_NODES, SpecLimitExceeded, _load_yaml
from beyondagent_core.types import Task

# --- react ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("max_turns", [1, 3])
def test_an_env_ending_the_episode_on_the_last_allowed_turn_is_terminated(max_turns: int) -> None:
    llm = ScriptedLLM([])
    trajectory = run(EpisodeRunner(ReactWorkflow(ReactConfig(max_turns=max_turns)),
                                   make_env=lambda: Countdown(steps=max_turns)), llm)
    assert trajectory.terminated and trajectory.metrics["turns"] == max_turns == len(llm.seen)
    assert trajectory.reward.success and trajectory.metrics["truncated"] is False


def test_every_sampling_key_set_reaches_the_model_and_max_turns_never_does() -> None:
    llm = ScriptedLLM(["stop"])
    config = ReactConfig(max_turns=4, temperature=0.0, top_p=1.0, max_tokens=7)
    run(EpisodeRunner(ReactWorkflow(config), make_env=Countdown), llm)
    assert llm.seen[0][1] == {"temperature": 0.0, "top_p": 1.0, "max_tokens": 7}
    llm = ScriptedLLM(["stop"])
    run(EpisodeRunner(ReactWorkflow(ReactConfig()), make_env=Countdown), llm)
    assert llm.seen[0][1] == {} and ReactConfig().max_turns == 10


@pytest.mark.parametrize(("key", "at_bound", "past"), [
    ("max_turns", MAX_TURNS, MAX_TURNS + 1),
    ("max_turns", 1, 0),
    ("max_tokens", MAX_TOKENS, MAX_TOKENS + 1),
    ("max_tokens", 1, 0),
    ("temperature", 0.0, -0.01),
    ("temperature", MAX_TEMPERATURE, MAX_TEMPERATURE + 0.01),
    ("top_p", 1.0, 1.01),
])
def test_react_config_takes_a_value_on_its_bound_and_refuses_one_past_it(key: str, at_bound, past) -> None:
    assert getattr(ReactConfig(**{key: at_bound}), key) == at_bound
    with pytest.raises(ValueError, match=key):
        ReactConfig(**{key: past})
    with pytest.raises(ValueError, match="top_p"):
        ReactConfig(top_p=0)  # > 0: a zero top_p samples nothing


def test_a_context_full_before_the_first_turn_is_truncated_and_still_evaluated() -> None:
    trajectory = run(EpisodeRunner(ReactWorkflow(ReactConfig(max_turns=3)), make_env=Countdown),
                     ScriptedLLM([], budget=0))
    assert trajectory.metrics["turns"] == 0 and trajectory.metrics["truncated"] is True
    assert not trajectory.terminated and trajectory.error is None and trajectory.reward.score == 0.0


# --- the env released on every way out ---------------------------------------------------------------


class Raising(ReactWorkflow):
    async def run(self, task, env, llm):
        await env.reset(task)
        raise KeyError("workflow bug")


class EvaluateBreaks(Countdown):
    def evaluate(self):
        raise RuntimeError("evaluate broke")


@pytest.mark.parametrize(("workflow", "env_class", "error"), [
    (Raising(), Countdown, "KeyError: 'workflow bug'"),
    (ReactWorkflow(ReactConfig(max_turns=1)), EvaluateBreaks, "RuntimeError: evaluate broke"),
])
def test_an_episode_that_fails_after_opening_its_env_closes_it(workflow, env_class, error: str) -> None:
    configure_logging()  # the console without tracebacks (drawing one takes a second); conftest restores it
    envs: list[Countdown] = []
    trajectory = run(EpisodeRunner(workflow, make_env=lambda: envs.append(env_class()) or envs[-1]), ScriptedLLM([]))
    assert trajectory.error == error and trajectory.reward.score == 0.0
    assert len(envs) == 1 and envs[0].closed


def test_a_cancelled_episode_closes_its_env_and_is_no_error_record() -> None:
    envs: list[Countdown] = []

    class Waiting:
        """Stands in for a model still generating when the step is cancelled."""

        def __init__(self) -> None:
            self.asked = asyncio.Event()

        async def chat(self, messages, **sampling):
            self.asked.set()
            await asyncio.Event().wait()  # never answers

    async def main() -> None:
        llm = Waiting()
        runner = EpisodeRunner(ReactWorkflow(), make_env=lambda: envs.append(Countdown()) or envs[-1])
        episode = asyncio.ensure_future(runner.run(Task("t1"), llm))
        await llm.asked.wait()
        episode.cancel()
        with pytest.raises(asyncio.CancelledError):
            await episode

    asyncio.run(main())
    assert len(envs) == 1 and envs[0].closed


# --- TokenChat's budget, exactly used up ------------------------------------------------------------


def two_turns(response_length: int) -> FixedChat:
    """hi -> "ok" (3 ids), then "go": 25 response tokens used before the second turn (see test_audit8_token_chat)."""
    chat = FixedChat([], prompt_length=PROMPT, response_length=response_length, max_new_tokens=40)
    chat.replies = [reply(chat, "ok"), [7, 8, 9]]
    first = asyncio.run(chat.chat([USER_HI]))
    messages = [USER_HI, {"role": "assistant", "content": first.content}, {"role": "user", "content": "go"}]
    try:
        asyncio.run(chat.chat(messages))
    finally:
        assert chat.response_used >= 25
    return chat


def test_a_response_budget_used_up_exactly_is_refused_and_one_token_left_is_a_one_token_turn() -> None:
    with pytest.raises(ContextLengthExceeded, match="25 response tokens used of the response budget=25"):
        two_turns(25)
    chat = two_turns(26)
    assert chat.asked[1][1]["max_tokens"] == 1 and chat.sequence.input_ids[-1:] == [7]
    assert chat.response_used == 26


@pytest.mark.parametrize(("ids", "limit", "reason"), [
    ([5, 6], 2, "length"),  # the whole limit, no ending: cut off
    ([5, IM_END], 2, "stop"),  # the whole limit, ended on the template's end-of-turn
    ([5, 0], 2, "stop"),  # ... or on eos
    ([5], 2, "stop"),  # under the limit: the engine stopped it
    ([5, 6, 7], 2, "length"),
])
def test_a_turn_is_cut_off_only_when_it_used_its_whole_limit_without_an_ending(ids, limit, reason) -> None:
    chat = FixedChat([], prompt_length=PROMPT, response_length=10, max_new_tokens=4)
    assert chat.finish_reason(ids, limit) == reason
    assert chat.stop_token_ids == [0, IM_END]


def test_the_calls_sampling_keys_override_the_engines_and_others_are_named() -> None:
    chat = FixedChat([[5, IM_END]], prompt_length=PROMPT, response_length=10, max_new_tokens=4)
    chat.sampling_params = {"temperature": 1.0, "top_p": 0.9}
    turn = asyncio.run(chat.chat([USER_HI], temperature=0.2, max_tokens=None))
    params = chat.asked[0][1]
    assert params == {"temperature": 0.2, "top_p": 0.9, "max_tokens": 4, "logprobs": True,
                      "stop_token_ids": [0, IM_END]}
    assert turn.finish_reason == "stop" and turn.token_ids == [5, IM_END] and turn.logprobs == [-0.5, -0.5]
    with pytest.raises(TypeError, match="unsupported sampling option.s. seed; the rollout engine takes temperature"):
        asyncio.run(chat.chat([USER_HI], seed=3))


# --- failure summaries, replayed references ----------------------------------------------------------


def test_the_failure_summary_lists_five_causes_most_frequent_first_and_counts_the_rest() -> None:
    tally = FailureTally()
    for index in range(5):
        for copy in range(index + 1):
            tally.add(f"task-{index}-{copy}", f"Error{index}")
    assert tally.count == 15
    assert tally.summary().splitlines() == [f"{n + 1} x Error{n} (first: task-{n}-0)" for n in range(4, -1, -1)]
    tally.add("task-x", "Rare")
    assert tally.summary().splitlines()[-1] == "... and 1 other causes" and len(tally.summary().splitlines()) == 6
    assert tally.summary(limit=6).splitlines()[-1] == "1 x Rare (first: task-x)"


@pytest.mark.parametrize(("ground_truth", "actions"), [
    ("left\n\n  down  \n", ["left", "down"]),
    (["left", "down"], ["left", "down"]),
    (("up",), ["up"]),
    ("  \n", None),
    ([], None),
    (["left", 3], None),
    ({"answer": 3}, None),
])
def test_a_reference_is_a_list_of_actions_or_a_text_with_one_per_line(ground_truth, actions) -> None:
    assert reference_actions(ground_truth) == actions


def test_a_replayed_reference_answers_its_actions_in_order_then_says_it_has_no_more() -> None:
    llm = ReplayLLM(["left", "down"])
    assert [asyncio.run(llm.chat([])).content for _ in range(2)] == ["left", "down"]
    with pytest.raises(ReferenceExhausted, match=r"no more actions \(it has 2\)"):
        asyncio.run(llm.chat([]))
    assert format_reference("a\nb") == "1. a\n2. b" and format_reference({"x": "é"}) == '{"x": "é"}'


@pytest.mark.parametrize(("finished", "size", "skipped"), [
    (2, 3, False),  # two finished: a baseline
    (1, 3, True),
    (1, 2, True),
    (2, 2, False),
    (1, 1, False),  # one episode to begin with: the estimator's to handle
    (0, 1, True),
    (0, 2, True),
])
def test_a_group_is_skipped_only_when_failures_left_it_fewer_than_two_finished(finished, size, skipped) -> None:
    assert skips_group(finished, size) is skipped


# --- which episodes are written ----------------------------------------------------------------------


@pytest.mark.parametrize(("value", "canonical"), [(0, "0.0"), ("1.0", "1.0"), (" 0.5 ", "0.5")])
def test_an_episode_share_from_zero_to_exactly_one_is_taken(value, canonical: str) -> None:
    assert check_sampling(value) == canonical


@pytest.mark.parametrize("value", ["1.000001", "-0.000001", "inf"])
def test_an_episode_share_just_past_its_range_is_refused(value: str) -> None:
    with pytest.raises(ValueError, match="logging.episodes must be all, none, failures or a fraction"):
        check_sampling(value)


def test_a_share_of_one_keeps_every_group_and_the_seed_changes_which_groups_a_share_keeps() -> None:
    groups = [g for g in range(20) for _ in range(2)]
    failed = [False] * len(groups)
    assert EpisodeSampling("1").picked(3, "train", groups, failed) == list(range(40))
    many = list(range(1000))  # a share of one keeps even the group that hashes highest
    assert EpisodeSampling("1").picked(3, "train", many, [False] * 1000) == many
    picks = {seed: [EpisodeSampling("0.3", seed=seed).picked(step, "train", groups, failed) for step in range(1, 6)]
             for seed in (0, 1)}
    assert picks[0] != picks[1]
    assert EpisodeSampling().setting == "0.1" and EpisodeSampling().seed == 0


# --- the YAML limits, exactly at them ------------------------------------------------------------------


def nested(levels: int) -> str:
    return "[" * levels + "]" * levels


def values(extra: int) -> str:
    """A spec of 99,906 + `extra` values once `*a` is expanded: the mapping, its 3 keys, a's list of 99 zeros
    (100 values), b's list of 998 copies of a (1 + 99,800), c's list of `extra` zeros (1 + extra)."""
    return (f"a: &a [{', '.join(['0'] * 99)}]\nb: [{', '.join(['*a'] * 998)}]\n"
            f"c: [{', '.join(['0'] * extra)}]\n")


def test_a_spec_nested_exactly_to_the_limit_is_read_and_one_level_more_is_refused() -> None:
    assert SPEC_MAX_DEPTH == 32 and SPEC_MAX_NODES == 100_000
    assert _load_yaml(nested(SPEC_MAX_DEPTH)) is not None
    with pytest.raises(SpecLimitExceeded, match="nesting deeper than 32 levels"):
        _load_yaml(nested(SPEC_MAX_DEPTH + 1))
    # through an alias: a's innermost list sits at depth 1 + 30 as written, 2 + 30 = 32 under b's [*a]
    assert _load_yaml(f"a: &a {nested(30)}\nb: [*a]\n")["b"] is not None
    with pytest.raises(SpecLimitExceeded, match="nesting deeper than 32 levels"):
        _load_yaml(f"a: &a {nested(31)}\nb: [*a]\n")


def test_a_spec_of_exactly_the_most_values_is_read_and_one_more_is_refused() -> None:
    assert len(_load_yaml(values(94))["b"]) == 998
    with pytest.raises(SpecLimitExceeded, match="more than 100000 values once aliases"):
        _load_yaml(values(95))
