"""Self-play on TicTacToe: the policy's win rate against a random player over training.

    python benchmarks/selfplay_curve.py                              # tiny, the example as it is
    python benchmarks/selfplay_curve.py --profile smollm2 --steps 40
    python benchmarks/selfplay_curve.py --run-dir runs/selfplay_tictactoe_smollm2   # plot a finished run
    python benchmarks/selfplay_curve.py --profile pool --steps 10    # half the games against earlier selves

The run is examples/selfplay_tictactoe.yaml (`env.opponent: self`: the policy plays both seats and both
are trained, `rae` advantages), in a fresh child process, or the run directory given. At every
validation (`backend.eval_every`) the policy plays the val games against the random opponent (greedy),
and the curve is its win, draw and loss rates; the training side is each seat's mean reward in
self-play (zero-sum: they sum to about 1, less what games cut short lose). The peer, measured in the same
run: a random legal move in the policy's place on the same val games (seeds, seats, opponent). A PNG
(`--out`) and the last line `selfplay_val_win_rate: <first> -> <last> (<gain>); ratio_vs_random_player: X`.
With an opponent pool (`--profile pool`) a third panel is the policy's Elo over the pool's snapshots.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "examples" / "selfplay_tictactoe.yaml"


def rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]


def seat_rewards(run_dir: Path) -> dict[int, dict[int, float]]:
    """step -> seat -> mean reward of the seat's training episodes (episodes.jsonl, what was kept)."""
    found: dict[int, dict[int, list[float]]] = {}
    path = run_dir / "episodes.jsonl"
    for line in path.read_text().splitlines() if path.exists() else []:
        record = json.loads(line)
        if record.get("split") == "train" and record.get("seat") is not None and record.get("score") is not None:
            found.setdefault(record["step"], {}).setdefault(record["seat"], []).append(record["score"])
    return {step: {seat: sum(v) / len(v) for seat, v in seats.items()} for step, seats in found.items()}


def random_player(run_dir: Path, games: int = 200) -> dict[str, float]:
    """The peer: a random legal move in the policy's place, against the same random opponent, on the
    run's val games (their tasks, seeds and seats), `games` times each: its win, draw and loss rates."""
    import random

    from beyondagent_core.types import Task
    from beyondagent_plugin_textarena.config import TextArenaConfig
    from beyondagent_plugin_textarena.env import TextArenaEnv
    from beyondagent_plugin_textarena.opponents import random_move

    tasks = [r for r in map(json.loads, (run_dir / "episodes.jsonl").read_text().splitlines()) if r["split"] == "val"]
    ids = sorted({r["task_id"] for r in tasks})
    counts = dict.fromkeys(("win", "draw", "loss", "unfinished"), 0)
    env = TextArenaEnv(TextArenaConfig(game="tictactoe", opponent="random"))
    for task_id in ids:
        for trial in range(games):
            env.reset(Task(task_id=task_id))
            rng, shown, done = random.Random(trial), "", False
            while not done:
                move = random_move("tictactoe", env._game, shown, rng)  # noqa: SLF001 - the game's legal moves
                step = env.step({"role": "assistant", "content": move})
                shown, done = step.observation[0]["content"], step.terminated
            counts[env.evaluate().details["outcome"]] += 1
    env.close()
    total = sum(counts.values())
    return {name: count / total for name, count in counts.items()}


def plot(run_dir: Path, path: Path, peer: dict[str, float]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    val = [r for r in rows(run_dir) if "val/win_rate" in r]
    pool = [r for r in rows(run_dir) if "pool/elo" in r]  # --profile pool: games against earlier snapshots
    figure, panels = plt.subplots(1, 3 if pool else 2, figsize=(16.5 if pool else 11, 4))
    left, right = panels[0], panels[1]
    for name, colour in (("win", "tab:green"), ("draw", "tab:grey"), ("loss", "tab:red")):
        left.plot([r["step"] for r in val], [r[f"val/{name}_rate"] for r in val], marker="o", color=colour,
                  label=f"{name} rate")
    left.axhline(peer["win"], color="tab:green", linestyle="--", alpha=0.6,
                 label="win rate of a random player in its place")
    left.set(title="greedy policy vs a random player (val games)", xlabel="training step", ylim=(-0.02, 1.02))
    left.legend()
    seats = seat_rewards(run_dir)
    for seat in (0, 1):
        steps = sorted(step for step in seats if seat in seats[step])
        right.plot(steps, [seats[s][seat] for s in steps], label=f"seat {seat}", alpha=0.8)
    right.set(title="self-play: each seat's mean reward (training)", xlabel="training step", ylim=(-0.02, 1.02))
    right.legend()
    if pool:
        elo = panels[2]
        steps = [r["step"] for r in pool]
        elo.plot(steps, [r["pool/elo"] for r in pool], marker="o", label="policy")
        elo.plot(steps, [r["pool/elo_best_snapshot"] for r in pool], marker=".", color="tab:grey",
                 label="best snapshot in the pool")
        won = elo.twinx()
        won.bar(steps, [r.get("pool/win_rate", 0.0) for r in pool], alpha=0.2, color="tab:green")
        won.set(ylim=(0, 1), ylabel="share of the step's pool games won (bars)")
        elo.set(title="Elo over the opponent pool (training)", xlabel="training step", ylabel="Elo")
        elo.legend(loc="upper left")
    figure.suptitle(run_dir.name)
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run-dir", type=Path, help="plot this finished run instead of running one")
    parser.add_argument("--profile", default=None, help="the example's profile (smollm2: the real model)")
    parser.add_argument("--steps", type=int, default=None, help="backend.total_steps (default: the spec's)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--output-dir", type=Path, default=Path("runs"))
    parser.add_argument("--out", type=Path, default=Path("selfplay_curve.png"))
    args = parser.parse_args()
    run_dir = args.run_dir
    if run_dir is None:
        overrides = [f"backend.device={args.device}", f"run.output_dir={args.output_dir}", "logging.episodes=all"]
        overrides += [f"backend.total_steps={args.steps}"] if args.steps else []
        command = [sys.executable, "-m", "beyondagent_core.cli", "run", str(SPEC), *overrides]
        command += ["--profile", args.profile] if args.profile else []
        subprocess.run(command, check=True)
        name = "selfplay_tictactoe" + (f"_{args.profile}" if args.profile else "")
        run_dir = args.output_dir / name
    peer = random_player(run_dir)
    plot(run_dir, args.out, peer)
    val = [r for r in rows(run_dir) if "val/win_rate" in r]
    print(f"val games against the random player, step: win / draw / loss ({run_dir})")
    for r in val:
        print(f"  {r['step']:>4}: {r['val/win_rate']:.3f} / {r['val/draw_rate']:.3f} / {r['val/loss_rate']:.3f}")
    print(f"figure: {args.out}")
    print(f"a random player in the policy's place (same games, seats and opponent, 200 plays each): "
          f"{peer['win']:.3f} / {peer['draw']:.3f} / {peer['loss']:.3f}")
    pool = [r for r in rows(run_dir) if "pool/elo" in r]
    if pool:
        print("games against the opponent pool, step: policy Elo / best snapshot's / won")
        for r in pool:
            print(f"  {r['step']:>4}: {r['pool/elo']:.0f} / {r['pool/elo_best_snapshot']:.0f} / "
                  f"{r.get('pool/win_rate', 0.0):.3f} of {r['pool/games']:.0f}")
    first, last = val[0]["val/win_rate"], val[-1]["val/win_rate"]
    print(f"selfplay_val_win_rate: {first:.3f} -> {last:.3f} ({last - first:+.3f}); "
          f"ratio_vs_random_player: {last / max(peer['win'], 1e-9):.2f}")


if __name__ == "__main__":
    main()
