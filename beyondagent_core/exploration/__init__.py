"""The exploration stage (self-questioning): seed tasks -> explorations -> filtered synthetic tasks.

- `engine.py`: the stage itself — a work queue of `(seed, i)` explorations drained by concurrent
  workers, the filters in order, each survivor appended to the cache at once (`explore_seeds`,
  `run_exploration`, `ExploreResult`);
- `executor.py`: where one exploration runs — the `Executor` protocol and `LocalExecutor`
  (in this process);
- `ray_executor.py`: `explore.executor: ray`, explorations on Ray actors across a cluster;
- `checkpoint.py`: the cache and its checkpoint, which make a killed exploration resumable.

Nothing is imported here: import the module you need (Ray is imported only by `ray_executor`).
"""
