"""What a backend receives: the mixed training data and the run it belongs to."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from beyondagent_core.blame import Built
from beyondagent_core.envs.local import LocalEnvOpener
from beyondagent_core.errors import PluginError, RunError, SpecError
from beyondagent_core.judging import JudgeSelector, check_judge
from beyondagent_core.logs import get_logger
from beyondagent_core.plugins import why_absent
from beyondagent_core.protocols import RunInfo, TrainingData  # noqa: F401 - their home before; backends import them here
from beyondagent_core.registry import Registry
from beyondagent_core.spec import POLICY_LLM, select_component

DEFAULT_ADVANTAGE = "grpo"

if TYPE_CHECKING:
    from beyondagent_core.plugins import PluginManager
    from beyondagent_core.protocols import (
        AdvantageEstimator,
        ChatLLM,
        EnvOpener,
        Judge,
        Workflow,
    )
    from beyondagent_core.runtime.episodes import EpisodeRunner
    from beyondagent_core.spec import Component, Spec


class PolicyProxy:
    """`llm: policy` as components see it: each call goes to the policy the backend serves now."""

    def __init__(self, run: RunContext):
        self.run = run

    @property
    def usage(self) -> dict[str, int]:
        return dict(getattr(self.run.policy_llm, "usage", None) or {})

    async def chat(self, messages: Any, **sampling: Any) -> Any:
        if self.run.policy_llm is None:
            raise RunError("llm is 'policy' but the backend is not serving its policy at this point of the run",
                           hint="use the torch backend, or set llm to an OpenAI-compatible endpoint (model, base_url)")
        return await self.run.policy_llm.chat(messages, **sampling)


def launch_settings(registry: Registry, env: Any) -> dict[str, Any]:
    """How `env.service: launch` starts the env's server: its venv's python and serve arguments."""
    settings: dict[str, Any] = {"args": tuple(getattr(env, "serve_args", ()))}
    if getattr(env, "venv", None):
        from rich.console import Console

        from beyondagent_core.venvs import ensure_venv_with_status, registered_recipe

        recipe = registered_recipe(registry, env.venv, where=f"the venv of env {env.name!r}")
        # built on first use (minutes of pip): said on stderr, with each step, never silently
        venv = ensure_venv_with_status(recipe, env.venv, console=Console(stderr=True, highlight=False))
        settings["python"] = str(venv.python)
    return settings


@attrs.define
class RunContext:
    """A run in progress: its spec, directory, and the way to build components and report.

    `resume` is set by `beyondagent run --resume`: the backend continues from its last
    checkpoint in `run_dir` (and says which spec keys differ when it cannot).

    A backend sets `planned_steps` once it knows the run's length, and `report` False when its
    spec turned the report off: a run stopped by Ctrl-C or SIGTERM then gets a report that says
    "stopped at step 20 of 80" (`last_step`: the last step reported to `step_finished`).
    """

    spec: Spec
    info: RunInfo
    manager: PluginManager
    resume: bool = False
    log: Any = attrs.field(factory=lambda: get_logger("beyondagent.run"))
    _env_opener: EnvOpener | None = attrs.field(default=None, init=False)
    _judges: JudgeSelector | None = attrs.field(default=None, init=False)
    _registry: Registry | None = attrs.field(default=None, init=False)
    _chat_llm: ChatLLM | None = attrs.field(default=None, init=False)
    _built: Built = attrs.field(factory=Built, init=False)  # what it built, to name a failing one
    policy_llm: ChatLLM | None = None
    planned_steps: int | None = None
    report: bool = True
    last_step: int | None = attrs.field(default=None, init=False)

    @property
    def run_dir(self) -> Path:
        return self.info.run_dir

    def build(self, key_path: str) -> Any:
        """Create the component the spec selects at `key_path` (e.g. `"env"`, `"reward"`).

        A component with a `bind(run)` method gets this context right after it is built
        (how a filter or judge reaches the run's envs, LLM and episode runner).
        """
        component = self.spec.component(key_path)
        if component is None or component.registration is None:
            return None
        return self.bound(self._built.add(component.create(), component))

    def bound(self, obj: Any) -> Any:
        """Give `obj` this context if it asks for it (`bind(run)`); returns `obj`."""
        bind = getattr(obj, "bind", None)
        if callable(bind):
            bind(self)
        return obj

    def describe(self, obj: Any) -> str:
        """A component this run built as errors name it (key, kind, name, plugin); else its class."""
        return self._built.describe(obj)

    def culprit(self, exc: BaseException) -> Component | None:
        """The component this run built that `exc` was raised in (innermost first), if any."""
        return self._built.culprit(exc)

    def env_opener(self) -> EnvOpener | None:
        """Where episodes get their envs (`env.service`); None when the spec selects no env.

        Built once per run and closed by `aclose()`: `local` runs the env in-process;
        `http://...` uses an environment service; `launch` starts one for the run.
        """
        if self._env_opener is None:
            component = self.spec.component("env")
            if component is None or component.registration is None:
                return None
            service = component.block.service
            registered = component.registration.spec
            where = f"{self.spec.path or 'the spec'}, key env.service"
            if component.block.serve_args and service != "launch":
                raise SpecError(f"env.serve_args is set but env.service is {service!r}: the arguments are for a "
                                "server the run launches", where=f"{self.spec.path or 'the spec'}, key env.serve_args",
                                hint="set env.service: launch, or remove env.serve_args")
            if service == "local":
                if getattr(registered, "venv", None):
                    raise SpecError(f"env {registered.name!r} runs in its own venv ({registered.venv!r}), "
                                    "not in this process", where=f"{where} (local)",
                                    hint="set env.service: launch (or the URL of a running `beyondagent env serve`)")
                self._env_opener = LocalEnvOpener(component.create, call_timeout=component.block.call_timeout)
            else:
                config = attrs.asdict(component.config) if attrs.has(type(component.config)) else {}
                launch = launch_settings(self.registry, registered)
                launch["args"] = (*launch["args"], *(str(arg) for arg in component.block.serve_args))
                launch["log_dir"] = str(self.run_dir / "logs")  # a launched server's output: logs/envservice-*.log
                if component.block.call_timeout is not None:
                    if service != "launch":
                        raise SpecError("env.call_timeout bounds env calls this run makes in-process or on a server "
                                        "it launches; a running service has its own limit",
                                        where=f"{self.spec.path or 'the spec'}, key env.call_timeout",
                                        hint="start that server with --call-timeout SECONDS and remove "
                                             "env.call_timeout")
                    launch["call_timeout"] = component.block.call_timeout
                self._env_opener = self.manager.first_answer(
                    "beyondagent_remote_env", env_name=registered.name, service=service, where=where,
                    config=config, launch=launch)
                if self._env_opener is None:
                    problem, hint = why_absent("envservice", self.manager.records.get("envservice"),
                                               provides="remote env opener")
                    raise PluginError(f"env.service: {service} needs the environment service, which comes with "
                                      f"beyondagent-plugin-envservice; {problem}", where=where,
                                      hint=f"{hint}, or set env.service: local for an env that runs in-process")
        return self._env_opener

    def env_factory(self) -> EnvOpener:
        """The env opener, required: a SpecError names `env.name` when the spec has no env."""
        opener = self.env_opener()
        if opener is None:
            raise SpecError("training needs an environment but env.name is not set",
                            where=f"{self.spec.path}, key env.name", hint="set env.name (see `beyondagent plugins`)")
        return opener

    def workflow(self) -> Workflow:
        """The workflow `workflow` selects; the built-in `react` loop when none is set."""
        from beyondagent_core.runtime.react import ReactWorkflow

        return self.build("workflow") or ReactWorkflow()

    def judges(self) -> JudgeSelector:
        """Each task's judge: its own `judge`, else `synthetic_reward` / `reward` by origin."""
        if self._judges is None:
            default, synthetic = self.build("reward"), self.build("synthetic_reward")
            configured = {}
            for key, judge in (("reward", default), ("synthetic_reward", synthetic)):
                component = self.spec.component(key)
                if judge is not None and component is not None:
                    check_judge(judge, component.described)
                    if component.name:
                        configured.setdefault(component.name, judge)

            def build(name: str) -> Judge:
                component = select_component(self.registry, "reward", {"name": name},
                                             key_path=f"judge {name!r} (named by a task)")
                judge = self.bound(self._built.add(component.create(), component))
                check_judge(judge, component.described)
                return judge

            self._judges = JudgeSelector(default=default, synthetic=synthetic, build=build, configured=configured)
        return self._judges

    def advantage_estimator(self) -> AdvantageEstimator:
        """The estimator `backend.advantage` selects; `grpo` (beyondagent-plugin-advantages) when unset."""
        component = self.spec.component("backend.advantage")
        if component is None or component.registration is None:
            where = f"{self.spec.path or 'the spec'}, key backend.advantage (unset: the default, grpo)"
            component = select_component(self.registry, "advantage", {"name": DEFAULT_ADVANTAGE}, key_path=where)
        estimator = self.bound(self._built.add(component.create(), component))
        if not callable(getattr(estimator, "estimate", None)):
            raise PluginError(f"{component.described} built a {type(estimator).__name__} without estimate(batch)",
                              hint="an advantage estimator must define estimate(batch) -> Advantages; "
                                   "report this to the plugin's author")
        return estimator

    def episode_runner(self) -> EpisodeRunner:
        """Everything an episode needs: the workflow, its envs (none if the spec has no env) and judges.

        Workflows that need an env fail in their episode when none is configured.
        """
        from beyondagent_core.runtime.episodes import EpisodeRunner

        return EpisodeRunner(workflow=self.workflow(), make_env=self.env_opener(), judge=self.judges(),
                             describe=self.describe)

    def chat_llm(self) -> ChatLLM | None:
        """The spec's `llm` (exploring, summarizing, feasibility checks); None when unset.

        `llm: policy` is the model being trained: calls go to `policy_llm`, which the backend
        sets while it serves the policy (during exploration and training).
        """
        llm = self.spec.llm
        if llm is None:
            return None
        if llm == POLICY_LLM:
            return PolicyProxy(self)
        if self._chat_llm is None:
            from beyondagent_core.llm import OpenAIChat

            self._chat_llm = OpenAIChat(llm)
        return self._chat_llm

    @property
    def registry(self) -> Registry:
        if self._registry is None:
            self._registry = Registry(self.manager)
        return self._registry

    async def aclose(self) -> None:
        """End of run: close the env opener (connection pools, a launched env service)."""
        opener, self._env_opener = self._env_opener, None
        if opener is not None:
            await opener.aclose()

    def close(self) -> None:
        """`aclose()` for sync callers."""
        if self._env_opener is not None:
            asyncio.run(self.aclose())

    def step_finished(self, step: int, metrics: dict[str, Any]) -> None:
        """Report one training step: logged as an event and passed to lifecycle hooks."""
        self.last_step = step
        self.log.info("train.step", step=step, **metrics)
        self.manager.notify("beyondagent_step_finished", run=self.info, step=step, metrics=metrics)
