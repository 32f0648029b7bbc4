"""`beyondagent eval`: a model on one split of a spec's tasks, k samples per task, no training.

- `evaluation`: the eval itself (the model, the split, resumable episodes, eval.json);
- `stats`: the numbers it reports (avg@k, best@k, pass@k, bootstrap intervals);
- `page`: eval.html;
- `command`: the command's arguments and printed summary.

Nothing is imported here: the CLI imports `command` when `beyondagent eval` is asked for, which
imports the rest only when an eval runs.
"""
