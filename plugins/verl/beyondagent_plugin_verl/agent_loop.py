"""Our episodes inside verl's rollout: an agent loop that runs the spec's workflow, env and judges.

Runs in verl's venv, in each `AgentLoopWorker` (a Ray actor). It gets there two ways, both public:
verl imports this module in every worker through the `verl.plugins` entry point (`import verl`
loads them; the `@register` below adds `beyondagent` to verl's agent-loop registry), and the
launcher writes an `agent_loop_config_path` file naming the same class with the run's settings:

    - name: beyondagent
      _target_: beyondagent_plugin_verl.agent_loop.BeyondAgentLoop
      spec_path: runs/x/spec.yaml        # the user's spec (secrets stay as `${oc.env:...}`)
      spec_overrides: []
      run_dir: runs/x
      max_new_tokens: 64
      train_groups: 8                    # tasks a training step (backend.batch_size)
      val_groups: 32                     # tasks in the val file

For each dataset row verl calls `run(sampling_params, **row)`: the loop rebuilds our `Task` from
the row (`extra_info.beyondagent_task`, written by the core's parquet writer), gives the workflow
a `VerlChat` (token in/out through verl's server manager), runs our `EpisodeRunner` (workflow +
env + the task's judge) and returns verl's `AgentLoopOutput`: prompt and response ids exactly as
generated, a response mask that is 1 only on model tokens, the rollout log-probs, and the judge's
score as `reward_score` (so verl's reward loop has nothing to do). Each episode's facts, and its
`episodes.jsonl` record when `logging.episodes` keeps it, go to this worker's spool file
(`episode_spool`); the launcher merges them. With an advantage estimator other than GRPO the
output also carries the episode's steps for it (`advantage_records`, read by `sync_trainer`).

An episode with several seats (a game the policy plays against itself: `beyondagent_core.runtime.seats`)
gives one output per seat, each from its own `VerlChat` with its own reward; verl's transfer queue keeps
each under its own key, and our estimator measures each seat against the same seat's games of the task
(the record's `seat`). verl hands every output of a row the last one's `reward_score` (its own
bookkeeping), so only our estimators, which read each seat's outcome from its record, train it; with
verl's own (`gae`) such an episode fails with the reason.

With `experience` (guided rollouts, `beyondagent_core.runtime.guidance`) the loop picks, per
training group, the samples shown the store's lessons and those started from a stored successful
prefix of their task (`experience.prefix_ratio`) — the same choice the torch backend makes — and
returns a guided episode that trains stripped (`experience.training`) as its replay without
the lessons (model tokens and log-probs exact); a prefix-started episode's replayed turns are in
its prompt (mask 0), so only what the policy sampled after them is trained. Each output then
carries `beyondagent_guidance` (guided, off-policy, lessons retrieved, turns replayed, the
trajectory) for `sync_trainer`, which marks the off-policy samples for the loss and summarizes the
step into the store. Validation samples are shown experiences only with `experience.val_mode:
all`, never one learned on the task being scored (`Guidance.scoring_experiences`).
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any
from uuid import uuid4

import attrs
from verl.experimental.agent_loop.agent_loop import (
    AgentLoopBase,
    AgentLoopMetrics,
    AgentLoopOutput,
    register,
)

from beyondagent_core.advantage_records import advantage_record
from beyondagent_core.advantages import failure_of
from beyondagent_core.episode_records import EpisodeSampling, PieceCache, episode_record
from beyondagent_core.runtime.guidance import Guidance, Guide, PrefixLLM, stripped_sequence, trains_stripped, wrapped
from beyondagent_core.runtime.seats import MultiSeatRefused
from beyondagent_core.runtime.tokens import ChatTemplate, TokenSequence
from beyondagent_core.sources.parquet import row_to_task
from beyondagent_core.types import Reward, Task, Trajectory
from beyondagent_plugin_verl import episode_spool
from beyondagent_plugin_verl.group_gate import GATE, Verdict
from beyondagent_plugin_verl.mapping import ADVANTAGE_RECORD as RECORD_KEY
from beyondagent_plugin_verl.mapping import AGENT_NAME, GUIDANCE_RECORD, failure_aware, guided, our_advantages
from beyondagent_plugin_verl.verl_chat import PromptTooLong, VerlChat, gateway_sample, split_response

_log = logging.getLogger(__name__)

# One runtime per (spec, worker process): the plugins, the run context and its env opener are
# built once, not once per episode (verl instantiates the loop for every sample).
_RUNTIMES: dict[tuple[str, tuple[str, ...], str], Any] = {}


class WorkerRuntime:
    """The spec's episode runner, built in this worker from the spec file."""

    def __init__(self, spec_path: str, overrides: tuple[str, ...], run_dir: str, cwd: str | None = None):
        from beyondagent_core.context import RunContext, RunInfo
        from beyondagent_core.pipeline import prepare

        if cwd and Path(cwd).is_dir() and Path.cwd() != Path(cwd):
            # Ray starts this process elsewhere; the spec's relative paths (a workflow's entrypoint
            # file, a data file) mean what they meant where `beyondagent run` was started
            os.chdir(cwd)

        session = prepare(spec_path, list(overrides))
        spec = session.spec
        info = RunInfo(name=spec.run.name, run_dir=Path(run_dir), seed=spec.run.seed, spec=spec.redacted())
        self.context = RunContext(spec=spec, info=info, manager=session.manager)
        self.runner = self.context.episode_runner()
        self.sampling = EpisodeSampling(spec.logging.episodes, seed=spec.run.seed)
        # our estimator reads each episode's steps and failure in verl's trainer (sync_trainer.py)
        self.records_steps = our_advantages(spec)
        # verl's V1 trainers with verl's estimator: failed episodes leave their groups here (group_gate.py)
        self.gates_failures = not failure_aware(spec)
        # experience-guided rollouts: the store is the run's (its sqlite file is shared with the trainer)
        self.guidance = (Guidance(spec.component("experience").block, self.context.build("experience"))
                         if guided(spec) else None)
        self.seed = spec.run.seed
        self.sessions: dict[tuple[Any, ...], int] = {}  # samples of a group seen here (rows without session_id)
        self._pieces: PieceCache | None = None

    def pieces(self, tokenizer: Any) -> PieceCache:
        """Each token id's text, decoded once per worker."""
        if self._pieces is None:
            self._pieces = PieceCache(lambda ids: tokenizer.batch_decode(ids, skip_special_tokens=False))
        return self._pieces


def runtime(spec_path: str, overrides: tuple[str, ...], run_dir: str, cwd: str | None = None) -> WorkerRuntime:
    key = (spec_path, overrides, run_dir)
    if key not in _RUNTIMES:
        _RUNTIMES[key] = WorkerRuntime(spec_path, overrides, run_dir, cwd)
    return _RUNTIMES[key]


def runtime_of_config(config: Any) -> WorkerRuntime:
    """The runtime of the run a composed verl config belongs to (its agent_loop_config_path file)."""
    import yaml

    path = config.actor_rollout_ref.rollout.agent.agent_loop_config_path
    entry = next(e for e in yaml.safe_load(Path(path).read_text()) if e.get("name") == AGENT_NAME)
    return runtime(str(entry["spec_path"]), tuple(str(o) for o in entry.get("spec_overrides") or ()),
                   str(entry.get("run_dir") or Path(entry["spec_path"]).parent), entry.get("cwd"))


def task_of(row: dict[str, Any]) -> Task:
    """Our Task from a verl dataset row (the serialized task our writer put in `extra_info`)."""
    extra = row.get("extra_info")
    plain = {"extra_info": dict(extra) if extra is not None else None, "data_source": row.get("data_source"),
             "prompt": list(row.get("raw_prompt") or row.get("prompt") or []), "reward_model": row.get("reward_model")}
    return row_to_task(plain, int(row.get("index", 0) or 0))


@attrs.frozen
class Place:
    """Where a dataset row's episode belongs: its split, verl's step, its task's place in the step
    (`group`) and its sample of that group (`session`)."""

    split: str
    step: int | None
    group: int
    session: int


def _plain_int(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


@register(AGENT_NAME)
class BeyondAgentLoop(AgentLoopBase):
    """verl agent loop running a BeyondAgent spec's workflow, env and judges for one dataset row."""

    def __init__(self, *args: Any, spec_path: str | None = None, spec_overrides: Any = (), run_dir: str | None = None,
                 cwd: str | None = None, max_new_tokens: int | None = None, train_groups: int | None = None, val_groups: int | None = None,
                 **kwargs: Any):
        super().__init__(*args, **kwargs)
        if not spec_path:
            raise ValueError("the `beyondagent` agent loop needs `spec_path` (and run_dir): run it through "
                             "`beyondagent run` (which writes rollout.agent.agent_loop_config_path), not bare verl")
        self.spec_path = str(spec_path)
        self.spec_overrides = tuple(str(o) for o in (spec_overrides or ()))
        self.run_dir = str(run_dir or Path(spec_path).parent)
        self.cwd = cwd
        self.max_new_tokens = int(max_new_tokens or self.rollout_config.response_length)
        self.groups = {"train": train_groups, "val": val_groups}
        self.template = ChatTemplate(self.tokenizer)

    async def run(self, sampling_params: dict[str, Any], **row: Any) -> AgentLoopOutput | list[AgentLoopOutput]:
        worker = runtime(self.spec_path, self.spec_overrides, self.run_dir, self.cwd)
        place = self.place(worker, row)
        uid = row.get("uid") if worker.gates_failures and place.split == "train" else None
        if uid is None or row.get("session_id") is None:
            seats = await self.episode(worker, place, sampling_params, row)
            outputs = [self.spooled(worker, row, place, *seat) for seat in seats]
            # a multi-seat episode: one sample per seat (verl's transfer queue keeps each under its own key)
            return outputs[0] if len(outputs) == 1 else outputs
        # verl's V1 trainer, its own estimator: a failed episode leaves its group (group_gate.py)
        uid = str(uid)
        try:  # (one seat: a multi-seat episode needs our estimators, which gate nothing here: `episode`)
            ((output, sequence, trajectory, off_policy, episode_id),) = await self.episode(worker, place,
                                                                                        sampling_params, row)
        except BaseException:
            GATE.report(uid, self.rollout_config.n, place.session, "error", waits=False)  # its siblings wait for it
            raise
        failure = failure_of(trajectory, trainable=any(output.response_mask))
        GATE.report(uid, self.rollout_config.n, place.session, failure)
        verdict, skipped = await GATE.verdict(uid, place.session)
        facts = output.extra_fields["beyondagent"]
        facts["gated"] = True
        if verdict is Verdict.DROP:
            facts["dropped"] = failure
        if skipped:
            facts["group_skipped"] = uid
        self.spooled(worker, row, place, output, sequence, trajectory, off_policy, episode_id)
        if verdict is Verdict.DROP:
            return []  # not in verl's batch: no sibling's baseline counts it
        if verdict is Verdict.SKIP:
            output.response_mask = [0] * len(output.response_mask)  # in the batch, but nothing of it trains
        return output

    def spooled(self, worker: WorkerRuntime, row: dict[str, Any], place: Place, output: AgentLoopOutput,
                sequence: TokenSequence, trajectory: Trajectory, off_policy: bool, episode_id: str) -> AgentLoopOutput:
        self.spool(worker, row, place, sequence, trajectory, output, episode_id=episode_id, off_policy=off_policy)
        return output

    async def episode(self, worker: WorkerRuntime, place: Place, sampling_params: dict[str, Any],
                      row: dict[str, Any]) -> list[tuple[AgentLoopOutput, TokenSequence, Trajectory, bool, str]]:
        """One episode of the row's task: per seat (one, unless the env's episode has several:
        `beyondagent_core.runtime.seats`), verl's output, what it trains on, the trajectory, whether it
        trains off-policy (stripped of its lessons) and its id."""
        task = task_of(row)
        leaks_before = worker.guidance.leaks_blocked if worker.guidance is not None else 0
        guide = self.guide(worker, task, place)  # synchronous: the counter's change is this sample's
        leaks = worker.guidance.leaks_blocked - leaks_before if worker.guidance is not None else 0
        chats: dict[int, VerlChat] = {}
        llms: dict[int, Any] = {}

        def seat_llm(seat: int, seats: int | None = None) -> Any:
            """Seat `seat`'s chat: its own token sequence and request id (the policy plays every seat)."""
            if seat not in llms:
                chats[seat] = VerlChat(self.server_manager, self.template, sampling_params, request_id=uuid4().hex,
                                       prompt_length=self.rollout_config.prompt_length,
                                       response_length=self.rollout_config.response_length,
                                       max_new_tokens=self.max_new_tokens)
                llms[seat] = wrapped(chats[seat], guide)
            return llms[seat]

        started = time.perf_counter()
        try:
            trajectories = await worker.runner.run_seats(task, seat_llm)
        finally:
            for chat in chats.values():
                chat.close()
        if len(trajectories) > 1 and not worker.records_steps:  # verl would give every seat the last one's reward
            error = (f"{MultiSeatRefused.__name__}: a multi-seat episode trains on verl with our advantage estimators "
                     "only (backend.advantage: grpo, rae, ...), not verl's own (gae)")
            trajectories = [Trajectory(task=task, error=error, reward=Reward(0.0, reason=error))]
        seconds = time.perf_counter() - started
        if 0 not in chats:  # failed before its first prompt: seat 0's chat, empty
            seat_llm(0)
            chats[0].close()
        return [self.seat_output(worker, place, task, trajectory, chats[trajectory.seat or 0],
                                 llms[trajectory.seat or 0], guide, leaks, seconds=seconds)
                for trajectory in trajectories]

    def seat_output(self, worker: WorkerRuntime, place: Place, task: Task, trajectory: Trajectory, chat: VerlChat,
                    llm: Any, guide: Guide | None, leaks: int, *, seconds: float
                    ) -> tuple[AgentLoopOutput, TokenSequence, Trajectory, bool, str]:
        """The output of one seat's trajectory (the episode's only one, for a one-seat env)."""
        lessons = list(guide.experiences) if guide is not None else []
        prefixed = llm.replayed if isinstance(llm, PrefixLLM) else 0  # fewer if the env ended first
        if prefixed:
            trajectory.metrics["prefix_turns"] = prefixed
        if guide is not None and (trajectory.error or "").startswith(PromptTooLong.__name__):
            what = f"its {len(lessons)} lessons" if lessons else f"its {prefixed} replayed turns"
            _log.warning("beyondagent: a guided rollout of task %s failed: with %s the prompt is longer than "
                         "backend.max_prompt_tokens (%s); raise max_prompt_tokens by their length, or lower "
                         "experience.k / prefix_fraction", task.task_id, what, trajectory.error)
        success = bool(trajectory.reward is not None and trajectory.reward.success)
        sequence, off_policy = chat.sequence, False
        if chat.gateway is not None:  # an `agent` episode: its calls through the gateway
            sequence, trajectory = gateway_sample(chat, trajectory)
            success = bool(trajectory.reward is not None and trajectory.reward.success)
        if lessons and place.split == "train" and trajectory.error is None \
                and trains_stripped(worker.guidance.block.training, success):  # validation is not trained
            sequence, off_policy = stripped_sequence(trajectory, self.template), True  # trained without the lessons
        # the weights version of an episode that never generated (it failed first): the ones this step
        # was generated with, one step behind in verl's synchronous trainer
        step = place.step
        output = self.output(sequence, trajectory, seconds=seconds,
                             versions=chat.weight_versions(max(step - 1, 0) if step is not None else 0))
        if worker.records_steps:
            output.extra_fields[RECORD_KEY] = {
                **advantage_record(trajectory, sequence.turn_spans, prompt_length=len(output.prompt_ids),
                                   response_length=len(output.response_ids)),
                "id": chat.request_id}  # the trainer's advantages find this episode's record by it
        if worker.guidance is not None:
            output.extra_fields["beyondagent"]["guided"] = bool(lessons)
            if worker.guidance.block.prefix_ratio:
                output.extra_fields["beyondagent"]["prefixed"] = prefixed
            if place.split != "train" and worker.guidance.block.val_mode == "all":
                output.extra_fields["beyondagent"]["leaks_blocked"] = leaks
            output.extra_fields[GUIDANCE_RECORD] = {"guided": bool(lessons), "off_policy": off_policy,
                                                    "retrieved": len(lessons), "prefixed": prefixed,
                                                    "trajectory": trajectory.to_dict()}
        return output, sequence, trajectory, off_policy, chat.request_id

    def place(self, worker: WorkerRuntime, row: dict[str, Any]) -> Place:
        extra = row.get("extra_info") or {}
        split = str(extra.get("split") or "train")
        step = _plain_int(row.get("global_steps"))
        index = _plain_int(row.get("index")) or 0
        groups = self.groups.get(split)
        group = index % groups if split == "train" and groups else index  # the task's place in its step
        session = _plain_int(row.get("session_id"))
        if session is None:  # verl's V1 trainer numbers a group's samples; elsewhere count them here
            key = (step, split, group)
            session = worker.sessions[key] = worker.sessions.get(key, -1) + 1
        return Place(split=split, step=step, group=group, session=session)

    def guide(self, worker: WorkerRuntime, task: Task, place: Place) -> Guide | None:
        """What this sample is given: in training, its group's draw (the torch backend's, `Guidance.plan`)
        — experiences, a stored prefix, or nothing; in validation, with `val_mode: all`, the
        experiences of other tasks, never one learned on this task (`Guidance.scoring_experiences`)."""
        if worker.guidance is None:
            return None
        if place.split != "train":
            (guide,) = worker.guidance.val_guides([task])
            return guide
        return worker.guidance.guide(task, self.rollout_config.n, place.session,
                                     seed=(worker.seed, "guides", place.step, place.group, task.task_id))

    def spool(self, worker: WorkerRuntime, row: dict[str, Any], place: Place, sequence: TokenSequence,
              trajectory: Trajectory, output: AgentLoopOutput, *, episode_id: str, off_policy: bool) -> None:
        """This episode's facts (the launcher's success rates, by verl's `global_steps` and split) and,
        when `logging.episodes` keeps it, its `episodes.jsonl` record, to this worker's spool file."""
        extra = row.get("extra_info") or {}
        split, step, group, session = place.split, place.step, place.group, place.session
        facts = output.extra_fields["beyondagent"]
        groups = self.groups.get(split)
        samples = self.rollout_config.val_kwargs.n if split == "val" else self.rollout_config.n
        failed = trajectory.error is not None or not facts["success"]
        record = None
        if episode_spool.keeps(worker.sampling, step=step, split=split, group=group, groups=groups, failed=failed):
            try:
                tokens = None
                if len(sequence):  # what verl trains on: the output's prompt and response
                    tokens = episode_spool.token_block(output.prompt_ids, output.response_ids, output.response_mask,
                                                       output.response_logprobs, sequence.turn_spans,
                                                       worker.pieces(self.tokenizer).pieces)
                record = episode_record(step=step if step is not None else 0, split=split,
                                        index=group * int(samples or 1) + session, group=group,
                                        trajectory=trajectory, tokens=tokens, guided=facts.get("guided", False),
                                        off_policy=off_policy)
            except Exception:  # noqa: BLE001 - a record the viewer misses must not stop verl's training
                _log.warning("beyondagent: the episodes.jsonl record of task %s was not written",
                             trajectory.task.task_id, exc_info=True)
        episode_spool.spool(Path(self.run_dir), step, {**facts, "global_steps": step, "split": split, "group": group,
                                                       "epoch": extra.get("epoch"), "episode": record,
                                                       "episode_id": episode_id})

    def output(self, sequence: TokenSequence, trajectory: Trajectory, *, seconds: float,
               versions: tuple[int | None, int | None] = (None, None)) -> AgentLoopOutput:
        """verl's output of the episode, trained on `sequence` (the chat's, or its replay without lessons)."""
        prompt_ids, response_ids, response_mask, logprobs = split_response(sequence,
                                                                           self.rollout_config.response_length)
        if not prompt_ids:  # the episode failed before its first prompt: a one-token stand-in, mask 0
            prompt_ids = [self._pad_id()]
        if not response_ids:  # no model turn (a failed episode): nothing to learn from, mask 0
            response_ids, response_mask, logprobs = [self._pad_id()], [0], [0.0]
        reward = trajectory.reward
        return AgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=response_ids,
            response_mask=response_mask,
            response_logprobs=logprobs,
            reward_score=float(reward.score) if reward is not None else 0.0,
            num_turns=len(trajectory.turns),
            metrics=AgentLoopMetrics(generate_sequences=0.0),
            extra_fields={
                # verl's V1 trainer computes off-policy staleness from these (and needs them set)
                "min_global_steps": versions[0],
                "max_global_steps": versions[1],
                # verl's validation reports reward_extra_info per data source; `acc` becomes its
                # core metric (val-core/<source>/acc/mean@1): our judge's success, i.e. pass@1
                "reward_extra_info": {"acc": float(bool(reward.success)) if reward is not None else 0.0},
                "beyondagent": {
                    "task_id": trajectory.task.task_id,
                    "origin": trajectory.task.origin,
                    "success": bool(reward.success) if reward is not None else False,
                    "reward": float(reward.score) if reward is not None else 0.0,
                    "model_turns": sequence.model_turns,
                    "error": trajectory.error,
                    "seconds": round(seconds, 4),
                    # observation tokens after the last model turn (no learning signal) and anything past
                    # rollout.response_length, left out of the response
                    "response_tokens_dropped": max(0, len(sequence) - sequence.prompt_length
                                                   - len(response_ids)),
                    # an `agent` episode's calls through the gateway, and the samples they became
                    **{key: trajectory.metrics[key] for key in ("gateway_calls", "gateway_samples", "gateway_splits")
                       if key in trajectory.metrics},
                },
            },
        )

    def _pad_id(self) -> int:
        pad = self.tokenizer.pad_token_id
        return int(pad if pad is not None else self.tokenizer.eos_token_id or 0)
