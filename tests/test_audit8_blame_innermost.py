"""`Built.culprit` answers the innermost built component of a traceback (eighth audit).

A built component that calls another (a workflow calling a judge, a store calling an estimator)
is on the traceback too, further out: the error must name the one that raised, not its caller.
The same holds through `raise ... from exc`: the raised exception's own frames come first, then
its cause's.
"""

from __future__ import annotations

from beyondagent_core.blame import Built


class Judge:
    def score(self) -> None:
        raise ValueError("the judge failed")


class Workflow:
    def __init__(self, judge: Judge):
        self.judge = judge

    def run(self) -> None:
        self.judge.score()


class Wrapper:
    """Catches what the workflow raised and raises its own error from it."""

    def __init__(self, workflow: Workflow):
        self.workflow = workflow

    def call(self) -> None:
        try:
            self.workflow.run()
        except ValueError as exc:
            raise RuntimeError("wrapped") from exc


def caught(call) -> BaseException:
    try:
        call()
    except BaseException as exc:  # noqa: BLE001 - the test inspects it
        return exc
    raise AssertionError("nothing was raised")


def test_the_innermost_built_component_is_the_culprit() -> None:
    judge = Judge()
    workflow = Workflow(judge)
    built = Built()
    built.add(workflow, "workflow component")
    built.add(judge, "reward component")
    assert built.culprit(caught(workflow.run)) == "reward component"

    only_workflow = Built()
    only_workflow.add(workflow, "workflow component")  # the judge was not built by this run
    assert only_workflow.culprit(caught(workflow.run)) == "workflow component"
    assert Built().culprit(caught(workflow.run)) is None


def test_the_raised_exception_is_searched_before_its_cause() -> None:
    judge = Judge()
    wrapper = Wrapper(Workflow(judge))
    built = Built()
    built.add(wrapper, "wrapper component")
    built.add(judge, "reward component")
    # RuntimeError's own traceback passes through the wrapper only; its cause's through the judge
    assert built.culprit(caught(wrapper.call)) == "wrapper component"
    no_wrapper = Built()
    no_wrapper.add(judge, "reward component")
    assert no_wrapper.culprit(caught(wrapper.call)) == "reward component"
