"""Two explorations filtering their batches at once on one `feasibility` filter judge each batch by its own runs.

The filter is `independent` (the engine calls `keep` outside its commit lock, concurrently for several
explorations). Whether "not one of the batch's re-runs got as far as a reward" must be counted per call:
read from the shared counters, another batch's runs that finished meanwhile decided it (a batch whose
own runs all failed got only a warning while a successful batch overlapped, and the reverse). Found by
the eighth mutation audit. The runner stands in for the run's episode runner; events, not timing, fix
the order: B's run succeeds while A's is still running, then A's fails.
"""

from __future__ import annotations

import asyncio

from beyondagent_plugin_synthesis.feasibility import Feasibility, FeasibilityConfig

from beyondagent_core.errors import RunError
from beyondagent_core.types import Reward, Task, Trajectory


def candidate(batch: str) -> Task:
    return Task(task_id=f"{batch}/syn-0", query="Reach the goal.", ground_truth=["right"], origin="synthetic",
                seed_task_id=batch)


class OrderedRunner:
    """A's run starts, B's run succeeds, then A's run fails with an env error."""

    def __init__(self) -> None:
        self.a_started, self.b_done = asyncio.Event(), asyncio.Event()

    async def run(self, task: Task, llm: object) -> Trajectory:
        if task.seed_task_id == "a":
            self.a_started.set()
            await self.b_done.wait()
            return Trajectory(task=task, error="EnvError: A's env broke")
        await self.a_started.wait()
        self.b_done.set()
        return Trajectory(task=task, reward=Reward(score=1.0, success=True))


def test_a_batch_whose_own_runs_all_failed_stops_even_when_another_batch_succeeded_meanwhile() -> None:
    async def both() -> list[object]:
        flt = Feasibility(FeasibilityConfig(solver="replay"), runner=OrderedRunner())
        return await asyncio.gather(flt.keep([candidate("a")], []), flt.keep([candidate("b")], []),
                                    return_exceptions=True)

    a, b = asyncio.run(both())
    assert isinstance(a, RunError), a
    assert "could not run any of its 1 checks" in str(a) and "A's env broke" in str(a)
    assert [task.task_id for task in b] == ["b/syn-0"]


def test_the_stats_still_count_every_batch() -> None:
    async def both() -> Feasibility:
        flt = Feasibility(FeasibilityConfig(solver="replay"), runner=OrderedRunner())
        await asyncio.gather(flt.keep([candidate("a")], []), flt.keep([candidate("b")], []), return_exceptions=True)
        return flt

    flt = asyncio.run(both())
    assert flt.stats["run_errors"] == 1 and flt.stats["kept"] == 1


