"""The names of the metrics the trainer writes to `metrics.jsonl`, in one place.

Every backend writes them (the torch trainer directly, the verl backend by mapping verl's names),
`run_records` reads them, `report` and the viewer draw them: all import these constants, so a
renamed metric cannot silently drop out of the report.
"""

from __future__ import annotations

# Rollouts of the training step (means over the step's episodes).
TRAIN_REWARD_MEAN = "train/reward_mean"
TRAIN_REWARD_STD = "train/reward_std"
TRAIN_SUCCESS_RATE = "train/success_rate"
TRAIN_RESPONSE_LENGTH = "train/response_length"  # mean generated tokens per episode
TRAIN_TURNS = "train/turns"  # mean turns per episode
TRAIN_FLAT_GROUPS = "train/flat_groups"  # share of groups whose rewards are all equal: zero advantage, no signal
# Only with `algorithm.dynamic_sampling`: generation batches the step sampled, and the groups whose
# rewards were all equal left out of its update.
TRAIN_GEN_BATCHES = "train/gen_batches"
TRAIN_DROPPED_GROUPS = "train/dropped_groups"
# Only with `algorithm.overlong`: the mean reward penalty, and the share of episodes penalized.
TRAIN_OVERLONG_PENALTY = "train/overlong_penalty"
TRAIN_OVERLONG_FRACTION = "train/overlong_fraction"
# Only when the batch holds synthetic tasks (exploration): per origin.
TRAIN_SYNTHETIC_FRACTION = "train/synthetic_fraction"
TRAIN_SUCCESS_RATE_ORIGINAL = "train/success_rate_original"
TRAIN_SUCCESS_RATE_SYNTHETIC = "train/success_rate_synthetic"
# Only with experience-guided rollouts (`experience`): success of guided and unguided rollouts, and
# (`experience.prefix_ratio`) of those started from a stored prefix (not counted as unguided).
TRAIN_SUCCESS_RATE_GUIDED = "train/success_rate_guided"
TRAIN_SUCCESS_RATE_UNGUIDED = "train/success_rate_unguided"
TRAIN_SUCCESS_RATE_PREFIXED = "train/success_rate_prefixed"

# Only with `agent` episodes (the OpenAI-compatible gateway): the share of episodes whose calls did not
# all extend one another (several training samples), samples and model calls per episode.
GATEWAY_SPLIT_EPISODES = "gateway/split_episodes"
GATEWAY_SAMPLES_PER_EPISODE = "gateway/samples_per_episode"
GATEWAY_CALLS_PER_EPISODE = "gateway/calls_per_episode"

# Only with an opponent pool (torch `backend.opponent_pool`): the policy's Elo rating, the best snapshot's,
# the step's games against the pool and their outcomes for the policy, and the snapshots kept.
POOL_ELO = "pool/elo"
POOL_ELO_BEST_SNAPSHOT = "pool/elo_best_snapshot"
POOL_GAMES = "pool/games"
POOL_WIN_RATE = "pool/win_rate"
POOL_DRAW_RATE = "pool/draw_rate"
POOL_LOSS_RATE = "pool/loss_rate"
POOL_SIZE = "pool/size"

# The advantage estimator's own metrics (`backend.advantage`), e.g. advantage/anchor_groups for gigpo.
ADVANTAGE_PREFIX = "advantage/"
# Failed episodes (an error, a timeout, a gateway split the backend cannot train, no model token) left
# out of their groups' statistics with advantage 0, by reason (`advantage_dropped`), and the groups
# skipped because failures left them fewer than two finished episodes (beyondagent_core.advantages).
# (advantages.py, the contract, names them relative to the prefix; a test holds the two together)
ADVANTAGE_DROPPED_EPISODES = "advantage/dropped_episodes"
ADVANTAGE_DROPPED_GROUPS = "advantage/dropped_groups"


def advantage_dropped(reason: str) -> str:
    """The metric counting the episodes dropped for `reason` (error, timeout, split, untrainable)."""
    return f"{ADVANTAGE_PREFIX}dropped_{reason}"


# Experience-guided rollouts' store and retrieval (`experience`), e.g. experience/hit_rate.
EXPERIENCE_PREFIX = "experience/"

# The policy update.
ACTOR_KL = "actor/kl"
ACTOR_CLIP_FRACTION = "actor/clip_fraction"
ACTOR_ENTROPY = "actor/entropy"
ACTOR_GRAD_NORM = "actor/grad_norm"
ACTOR_PG_LOSS = "actor/pg_loss"
ACTOR_LR = "actor/lr"

# Throughput.
PERF_TOKENS_PER_S = "perf/tokens_per_s"
PERF_STEP_TIME_S = "perf/step_time_s"
# Only on a CUDA device (torch backend; verl's names): the step's peak memory allocated and reserved, GiB.
PERF_MAX_MEMORY_ALLOCATED_GB = "perf/max_memory_allocated_gb"
PERF_MAX_MEMORY_RESERVED_GB = "perf/max_memory_reserved_gb"

EPOCH = "epoch"

# Only with `algorithm.sft`, at step 0: the warm-up's last-epoch mean NLL per trained token, its
# examples and the tokens it trained an epoch.
SFT_LOSS = "sft/loss"
SFT_EXAMPLES = "sft/examples"
SFT_TOKENS = "sft/tokens"

# Asynchronous rollout (backend.rollout_mode one_step_off | async on the torch backend).
ROLLOUT_STALENESS = "rollout/staleness"  # mean policy versions a step's samples lag behind the trained policy
ROLLOUT_STALE_DROPPED = "rollout/stale_dropped"  # samples dropped for lagging more than backend.max_staleness
PERF_ROLLOUT_WAIT_S = "perf/rollout_wait_s"  # the update waited this long for the step's batch
PERF_WEIGHTS_WAIT_S = "perf/weights_wait_s"  # the optimizer step waited this long for the rollout in flight

# Only on evaluation steps.
VAL_PASS_AT_1 = "val/pass@1"
VAL_REWARD_MEAN = "val/reward_mean"
VAL_EPISODE_ERRORS = "val/episode_errors"  # validation episodes that failed (an error): they count 0 in pass@1

# Keys every metrics.jsonl line has, written by `MetricsLog.write` itself.
STEP = "step"
TIME = "time"
RESERVED = (STEP, TIME)

ALL = (
    TRAIN_REWARD_MEAN, TRAIN_REWARD_STD, TRAIN_SUCCESS_RATE, TRAIN_RESPONSE_LENGTH, TRAIN_TURNS,
    ACTOR_KL, ACTOR_CLIP_FRACTION, ACTOR_ENTROPY, ACTOR_GRAD_NORM, ACTOR_PG_LOSS, ACTOR_LR,
    PERF_TOKENS_PER_S, PERF_STEP_TIME_S, PERF_MAX_MEMORY_ALLOCATED_GB, PERF_MAX_MEMORY_RESERVED_GB, EPOCH,
    VAL_PASS_AT_1, VAL_REWARD_MEAN,
)
