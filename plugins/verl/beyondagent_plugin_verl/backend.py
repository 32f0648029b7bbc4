"""The `verl` backend: the spec -> verl's config, the tasks -> parquet, verl's trainer as a child.

    train(data, run):
        venv   = verl's cached venv (built on first use)
        files  = <run_dir>/verl/: data/train.parquet (every epoch's mix), spec.yaml (for the workers),
                 agent_loop.yaml, verl_config.yaml (composed and validated by verl itself)
        start  = python -m beyondagent_plugin_verl.trainer --compose ...   (in the venv): verl composes
                 and validates verl_config.yaml, then the process waits for the launcher's `go`
        check  = our agent loop registered in verl; the GPUs verl was told about exist; then `go`:
                 the same process trains (verl is imported once)
                 output -> <run_dir>/verl/verl.log; step metrics -> <run_dir>/metrics.jsonl;
                 the workers' episode records -> <run_dir>/episodes.jsonl (`episode_spool`)

`describe(run)` (`beyondagent run --dry-run`) does the first three and prints the composed config.
A failure inside verl becomes a `RunError` with the cause found in the log (a GPU, Ray, CUDA or
config problem) and the log's path; the console never gets verl's whole traceback.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import attrs
import yaml

from beyondagent_core import reproduce
from beyondagent_core.context import RunContext, TrainingData
from beyondagent_core.errors import RunError, SpecError
from beyondagent_core.jsonl import append_jsonl, write_jsonl
from beyondagent_core.logs import get_logger
from beyondagent_core.metric_names import VAL_EPISODE_ERRORS
from beyondagent_core.worker_spec import worker_spec
from beyondagent_plugin_verl import episode_spool
from beyondagent_plugin_verl import metrics as metric_map
from beyondagent_plugin_verl.config import RESUMABLE_KEYS, VerlConfig
from beyondagent_plugin_verl.mapping import (
    AGENT_NAME,
    CPU_PLATFORM,
    TRAINER_MODULE,
    RunFiles,
    own_trainer,
    verl_overrides,
)

log = get_logger("beyondagent.verl")

VERL_DIR = "verl"
CONFIG_FILE = "verl_config.yaml"
SETTINGS_FILE = "learning_settings.json"
COMPOSE_TIMEOUT_S = 600
SECRET_VAR = "BEYONDAGENT_VERL_SECRET_{}"
METRICS_FILE = "metrics.jsonl"
# What a failed verl run's log says, and what we tell the user (first match wins).
CAUSES: tuple[tuple[str, str, str], ...] = (
    (r"No CUDA GPUs are available|Found no NVIDIA driver|torch\.cuda\.is_available\(\) is False",
     "verl could not use a CUDA GPU",
     "verl's training needs NVIDIA GPUs (backend.gpus_per_node of them on each node); see docs/verl.md"),
    (r"CUDA out of memory|OutOfMemoryError", "a GPU ran out of memory",
     ("lower backend.micro_batch_size or backend.gpu_memory_utilization, or set "
      "backend.verl.actor_rollout_ref.actor.fsdp_config.param_offload: true")),
    ((r"(?:Total available GPUs|resource.*(?:GPU|CPU)).*(?:less than|not enough|insufficient|cannot be satisfied)|"
      r"Resources requested.*exceed"), "Ray could not find the resources verl asked for",
     "check backend.nodes and backend.gpus_per_node against `ray status` (or this machine's GPUs)"),
    (r"Could not connect to Ray|Failed to connect to GCS|ConnectionError: .*[Rr]ay",
     "Ray did not start or could not be reached",
     "for a cluster, set backend.ray_address (or RAY_ADDRESS) to the head node; see docs/verl.md"),
    (r"Agent loop \S+ not registered", "verl did not find our agent loop in a worker",
     "rebuild verl's venv: beyondagent verl setup --rebuild"),
    # our own error in a rollout worker (a spec value only the worker can check, e.g. a workflow's
    # entrypoint file): verl's last words are then about the episodes it lost, not this cause
    (r"beyondagent_core\.errors\.(?:SpecError|RunError): ", "our agent loop failed in verl's rollout worker",
     "fix what the message names; the log has the worker's traceback"),
)
# Only the end of a failed run's log is searched for them (where the error is), not its warnings.
FAILURE_TAIL_LINES = 300


class VerlBackend:
    def __init__(self, config: VerlConfig):
        self.config = config

    # --- dry run ------------------------------------------------------------------------

    def describe(self, run: RunContext) -> str:
        """Compose and validate verl's config for this spec; write it and return it as text."""
        data_dir = run.run_dir.resolve() / VERL_DIR / "data"
        files = self._files(run, train_files=(str(data_dir / "train.parquet"),),
                            val_files=(str(data_dir / "val.parquet"),)
                            if run.spec.component("tasks.val") and run.spec.component("tasks.val").name else ())
        venv = self._venv()
        composed = self._compose(run, files, venv)
        text = Path(composed["config"]).read_text()
        loop = composed["agent_loop"]
        status = (f"registered ({loop['target']})" if loop["registered"] else f"NOT registered: {loop['error']}")
        return (f"verl config (composed by verl {composed.get('verl', '0.9.1')} and checked by its validate_config in "
                f"{composed['total_s']:.0f} s), written to {composed['config']}:\n{text}\n"
                f"agent loop `{AGENT_NAME}` in verl's venv: {status}\n"
                f"  {files.agent_loop_config}: the spec's workflow, env and judges run inside verl's rollout workers\n"
                f"verl's venv: {venv.path}")

    # --- training -----------------------------------------------------------------------

    def train(self, data: TrainingData, run: RunContext) -> dict[str, Any]:
        from beyondagent_plugin_verl.data import write_run_data

        config = self.config
        venv = self._venv()
        verl_dir = run.run_dir.resolve() / VERL_DIR  # absolute: verl's workers run elsewhere
        try:
            written = write_run_data(data, verl_dir / "data", epochs=config.epochs, total_steps=config.total_steps,
                                     batch_size=config.batch_size)
        except ValueError as exc:
            raise RunError(str(exc), where="the mixer's tasks") from None
        if written.steps < 1:
            raise RunError(f"{written.rows} training rows make no full batch of backend.batch_size="
                           f"{config.batch_size}", where=f"{run.spec.path}, key backend.batch_size",
                           hint="lower batch_size or add tasks")
        log.info("verl.data", rows=written.rows, epochs=written.epochs, steps=written.steps, train=str(written.train))
        run.planned_steps = written.steps  # an interrupted run says "stopped at step 20 of 80"
        resumed_from = check_resume(run, config)
        files = self._files(run, train_files=(str(written.train),),
                            val_files=(str(written.val),) if written.val else (), val_groups=len(data.val))
        # one process composes, waits for the checks below, then trains: verl is imported once
        answer_path = files.agent_loop_config.parent / "compose_answer.json"
        answer_path.unlink(missing_ok=True)
        trainer = self._start(run, venv, ["--compose", str(self._compose_request(run, files)), str(answer_path)],
                              modules=(TRAINER_MODULE,) if own_trainer(run.spec) else ())
        try:
            composed = self._composed(run, trainer, answer_path)
            reproduce.add_launched(run.run_dir, run.spec, backend="verl", device=config.device)
            self._preflight(composed)
            if resumed_from is not None:
                log.info("verl.resume", checkpoint_step=resumed_from)
            resume_step = verl_resume_step(run.run_dir)
            records = episode_spool.prepare(run.run_dir, resume_step=resume_step,
                                            revalidates=bool(config.eval_every and written.val))
            log.info("verl.episode_records", records=records)
            if resume_step:
                trim_metrics(run.run_dir, resume_step)
            with contextlib.suppress(BrokenPipeError):  # it ended already: _follow reports why, from its log
                trainer.process.stdin.write("go\n")
                trainer.process.stdin.close()
        except BaseException:
            _stop(trainer.process)
            raise
        final = self._follow(run, trainer, Path(composed["config"]), steps=written.steps)
        page = write_run_report(run)
        if page is not None:
            final["report"] = str(page)
        return final

    def _preflight(self, composed: dict[str, Any]) -> None:
        loop = composed["agent_loop"]
        if not loop["registered"]:
            raise RunError(f"our agent loop is not registered in verl: {loop['error']}",
                           where="verl's venv (the `verl.plugins` entry point `beyondagent`)",
                           hint="beyondagent verl setup --rebuild")
        if self.config.device == "cpu":
            return  # Ray gets logical GPUs (mapping.cpu_settings)
        gpus = composed.get("gpus", [])
        on_cluster = self.config.ray_address is not None or os.environ.get("RAY_ADDRESS")
        if not on_cluster and len(gpus) < self.config.gpus_per_node:
            raise RunError(f"verl's trainer needs {self.config.gpus_per_node} GPU(s) on this node "
                           f"(backend.gpus_per_node) but torch in verl's venv sees {len(gpus)}",
                           where="backend.gpus_per_node",
                           hint="run on a machine with NVIDIA GPUs (docs/verl.md), or join a Ray cluster with "
                                "backend.ray_address; on a CPU, `backend.device: cpu` runs verl's trainer "
                                "slowly (tests, development) and `backend: torch` trains the same spec")

    def _launch(self, run: RunContext, config_path: Path, venv: Any, *, steps: int,
                modules: tuple[str, ...] = ()) -> dict[str, Any]:
        """verl's trainer in its venv on `config_path` (composed before), followed to its end."""
        trainer = self._start(run, venv, [str(config_path)], modules=modules)
        trainer.process.stdin.close()  # read only by --compose
        return self._follow(run, trainer, config_path, steps=steps)

    def _start(self, run: RunContext, venv: Any, args: list[str], *, modules: tuple[str, ...] = ()) -> Trainer:
        """`python -m beyondagent_plugin_verl.trainer ARGS` in verl's venv, its output in `verl.log`;
        `modules` are ours that verl must import in each of its processes (`VERL_USE_EXTERNAL_MODULES`)."""
        verl_dir = run.run_dir.resolve() / VERL_DIR
        attempt = len(list(verl_dir.glob("verl_metrics.*.jsonl")))
        verl_metrics = verl_dir / f"verl_metrics.{attempt}.jsonl"
        log_path = verl_dir / "verl.log"
        env = venv.environ({"VERL_FILE_LOGGER_PATH": str(verl_metrics), "PYTHONUNBUFFERED": "1",
                            "RAY_DEDUP_LOGS": "0", **worker_spec(run.spec, SECRET_VAR)[1]})
        if self.config.ray_address:
            env["RAY_ADDRESS"] = self.config.ray_address
        if modules:
            env["VERL_USE_EXTERNAL_MODULES"] = ",".join(filter(None, [env.get("VERL_USE_EXTERNAL_MODULES"), *modules]))
        if self.config.device == "cpu":
            env["VERL_PLATFORM"] = CPU_PLATFORM  # Ray's workers inherit it from the trainer's process
            env["VERL_ENGINE_DEVICE"] = "cuda"  # verl's FSDP engine (registered for cuda) runs on any torch device
        with log_path.open("a") as out:
            out.write(f"\n==== beyondagent: verl trainer, attempt {attempt} ====\n")
            out.flush()
            process = subprocess.Popen([str(venv.python), "-m", "beyondagent_plugin_verl.trainer", *args],
                                       stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.PIPE, env=env,
                                       cwd=str(verl_dir), start_new_session=True, text=True)
        return Trainer(process, log_path, verl_metrics)

    def _composed(self, run: RunContext, trainer: Trainer, answer_path: Path) -> dict[str, Any]:
        """The trainer process's compose answer (`trainer.compose_then_wait`), once it is written."""
        deadline = time.monotonic() + COMPOSE_TIMEOUT_S
        while not answer_path.is_file():
            code = trainer.process.poll()
            if code is not None and not answer_path.is_file():
                tail = trainer.log_path.read_text(errors="replace")[-2500:]
                raise RunError(f"composing verl's config failed (exit {code}):\n{tail}",
                               where=f"the whole log: {trainer.log_path}", hint="beyondagent verl setup (checks verl's venv)")
            if time.monotonic() > deadline:
                raise RunError(f"composing verl's config took over {COMPOSE_TIMEOUT_S} s",
                               where=f"the whole log: {trainer.log_path}")
            time.sleep(0.2)
        answer = json.loads(answer_path.read_text())
        if not answer.get("ok"):
            raise compose_error(answer, run.spec.path)
        log.info("verl.composed", config=answer["config"], seconds=answer["total_s"])
        return answer

    def _follow(self, run: RunContext, trainer: Trainer, config_path: Path, *, steps: int) -> dict[str, Any]:
        """Follow the trainer process to its end: each step's metrics and episodes as verl logs
        them; `backend.timeout_s`; a failure as one error naming the cause in the log."""
        process, log_path = trainer.process, trainer.log_path
        log.info("verl.started", config=str(config_path), log=str(log_path), steps=steps, resume=run.resume)
        started = time.monotonic()
        last: dict[str, Any] = {}
        reader = _MetricsReader(trainer.verl_metrics)
        try:
            while True:
                code = process.poll()
                for step, values in reader.new_steps():
                    # verl logs a step once its rollouts and validation are back: its spool is complete
                    lines = episode_spool.take_step(run.run_dir, step)
                    last = self._report(run, step, values, [line for line in lines if line.get("split") == "train"],
                                        val=[line for line in lines if line.get("split") == "val"])
                if code is not None:
                    break
                if self.config.timeout_s and time.monotonic() - started > self.config.timeout_s:
                    _stop(process)
                    raise RunError(f"verl ran past backend.timeout_s={self.config.timeout_s} s and was stopped",
                                   where=str(log_path))
                time.sleep(1.0)
        except BaseException:
            _stop(process)
            raise
        if code != 0:
            raise failure(log_path, code)  # the spool stays for a look; the next launch drops it
        for step in episode_spool.pending_steps(run.run_dir):  # rows verl gave no step to
            episode_spool.take_step(run.run_dir, step)
        log.info("verl.finished", seconds=round(time.monotonic() - started, 1), steps=len(reader.seen))
        return last

    def _report(self, run: RunContext, step: int, values: dict[str, Any],
                episodes: list[dict[str, Any]] | None = None,
                val: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        ours = {**metric_map.map_step(values), **metric_map.episode_metrics(episodes or [])}
        if val:  # the step's validation episodes: those that failed count 0 in verl's pass@1, said here
            ours[VAL_EPISODE_ERRORS] = float(sum(1 for e in val if e.get("error")))
            ours.update(metric_map.val_experience_metrics(val))  # experience.val_mode: all
        failed = [e for e in episodes or [] if e.get("error")]
        if failed:  # left out of their groups (advantage/dropped_*): said on the console, as the torch backend does
            log.warning("verl.episode_errors", step=step, failed=len(failed), episodes=len(episodes),
                        first=failed[0]["error"])
        append_jsonl(run.run_dir / METRICS_FILE, [{"step": step, "time": time.time(), **ours}])
        run.step_finished(step, {k: v for k, v in ours.items() if not k.startswith("verl/")})
        return ours

    # --- evaluation -----------------------------------------------------------------------

    @staticmethod
    def checkpoint_model(root: Path, *, merge: bool, say: Callable[[str], None]) -> Path | None:
        """`beyondagent eval --checkpoint`: a verl checkpoint (FSDP shards) under `root` as the HF
        directory verl's model merger makes of it (merged once, cached next to it; with `merge`
        False, where it would be); None when `root` holds no verl checkpoint."""
        from beyondagent_plugin_verl import checkpoint

        actor = checkpoint.find_actor_dir(root)
        if actor is None:
            return None
        if not merge:
            return checkpoint.merged_dir(actor.resolve())
        return checkpoint.merged_model(actor, say=say)

    @contextlib.contextmanager
    def eval_llm(self, run: RunContext) -> Iterator[Any]:
        """`beyondagent eval --checkpoint`: the model at `model.path` (a verl checkpoint arrives merged
        into an HF directory, `checkpoint.py`) served in this process by the torch backend's policy
        LLM, with this spec's sampling: `temperature`, `top_p`, `max_new_tokens` a turn and
        `max_prompt_tokens + max_response_tokens` an episode, as verl's rollout has them."""
        try:
            from beyondagent_plugin_torch.config import TorchConfig
            from beyondagent_plugin_torch.trainer import TorchBackend
        except ImportError:
            raise RunError("evaluating a checkpoint in this process needs beyondagent-plugin-torch (its generation "
                           "loop serves the model)", where=f"{run.spec.path}, key backend.name",
                           hint="pip install beyondagent-plugin-torch; or serve the model with vLLM "
                                f"(`vllm serve {run.spec.model.path}`) and pass --model NAME --base-url URL") from None
        config = self.config
        serving = TorchConfig(temperature=config.temperature, top_p=config.top_p, max_new_tokens=config.max_new_tokens,
                              max_episode_tokens=config.max_prompt_tokens + config.max_response_tokens)
        with TorchBackend(serving).policy_llm(run) as llm:
            yield llm

    # --- pieces ---------------------------------------------------------------------------

    def _venv(self) -> Any:
        """verl's venv; the first time it is built (minutes), with its steps shown on stderr."""
        from rich.console import Console

        from beyondagent_plugin_verl.setup_command import ensure

        venv = ensure(console=Console(stderr=True, highlight=False))
        log.info("verl.venv", path=str(venv.path), built_in_s=venv.info().get("seconds"))
        return venv

    def _files(self, run: RunContext, *, train_files: tuple[str, ...], val_files: tuple[str, ...],
               val_groups: int | None = None) -> RunFiles:
        run_dir = run.run_dir.resolve()  # every path verl sees is absolute: its workers have other cwds
        verl_dir = run_dir / VERL_DIR
        verl_dir.mkdir(parents=True, exist_ok=True)
        files = RunFiles(run_dir=run_dir, train_files=train_files, val_files=val_files,
                         agent_loop_config=verl_dir / "agent_loop.yaml")
        spec_path = verl_dir / "spec.yaml"
        spec_path.write_text(yaml.safe_dump(worker_spec(run.spec, SECRET_VAR)[0], sort_keys=False, allow_unicode=True))
        loop = [{"name": AGENT_NAME, "_target_": "beyondagent_plugin_verl.agent_loop.BeyondAgentLoop",
                 "spec_path": str(spec_path), "spec_overrides": [], "run_dir": str(run_dir),
                 "cwd": str(Path.cwd()),  # where the spec's relative paths point (a workflow's entrypoint file)
                 "max_new_tokens": self.config.max_new_tokens,
                 # the tasks of a training step and of an evaluation: `logging.episodes` picks among them
                 "train_groups": self.config.batch_size, "val_groups": val_groups}]
        files.agent_loop_config.write_text(yaml.safe_dump(loop, sort_keys=False))
        return files

    def _compose_request(self, run: RunContext, files: RunFiles) -> Path:
        """What `compose.py` composes: our overrides of verl's keys, the model, where the config goes."""
        overrides = verl_overrides(run.spec, self.config, files, model_path=run.spec.model.path)
        request_path = files.agent_loop_config.parent / "compose_request.json"
        out = files.agent_loop_config.parent / CONFIG_FILE
        request_path.write_text(json.dumps({"model_path": run.spec.model.path, "out": str(out),
                                            "overrides": [o.as_list() for o in overrides]}, default=str))
        return request_path

    def _compose(self, run: RunContext, files: RunFiles, venv: Any) -> dict[str, Any]:
        """Composed in a process of its own (the dry run; a run composes in its trainer's process)."""
        request_path = self._compose_request(run, files)
        try:
            result = venv.run(["-m", "beyondagent_plugin_verl.compose", str(request_path)], timeout=COMPOSE_TIMEOUT_S,
                              cwd=str(files.agent_loop_config.parent))
        except subprocess.TimeoutExpired:
            raise RunError(f"composing verl's config took over {COMPOSE_TIMEOUT_S} s", where=str(venv.path)) from None
        lines = result.stdout.strip().splitlines()
        try:
            answer = json.loads(lines[-1])
        except (IndexError, ValueError):
            raise RunError(f"composing verl's config failed (exit {result.returncode}):\n{result.stderr[-2500:]}",
                           where=str(venv.path), hint="beyondagent verl setup (checks verl's venv)") from None
        if not answer.get("ok"):
            raise compose_error(answer, run.spec.path)
        log.info("verl.composed", config=answer["config"], seconds=answer["total_s"])
        return answer


def learning_settings(run: RunContext, config: VerlConfig) -> dict[str, Any]:
    """What a resumed run must keep: the model, `algorithm:`, the critic (PPO; None without: as a run
    from before critics recorded nothing) and the backend keys that shape learning."""
    backend = {k: v for k, v in attrs.asdict(config).items() if k not in RESUMABLE_KEYS}
    critic = None if run.spec.critic is None else attrs.asdict(run.spec.critic)
    return json.loads(json.dumps({"model": attrs.asdict(run.spec.model), "algorithm": attrs.asdict(run.spec.algorithm),
                                  "critic": critic, "backend": backend}, default=str))


def check_resume(run: RunContext, config: VerlConfig) -> int | None:
    """Record the run's learning settings; on `--resume`, refuse changed ones. Returns verl's last checkpoint step.

    verl itself continues from `<run_dir>/checkpoints` (`trainer.resume_mode: auto`), dataloader
    position included; this check makes a changed spec an error instead of a silently different run.
    """
    path = run.run_dir / VERL_DIR / SETTINGS_FILE
    settings = learning_settings(run, config)
    if run.resume and path.is_file():
        before = json.loads(path.read_text())
        changed = [f"{key} ({old!r} -> {new!r})" for key, old, new in _differences(before, settings)]
        if changed:
            raise SpecError(f"--resume with changed settings: {'; '.join(changed[:8])}",
                            where=f"{run.spec.path}", hint="put them back, or start a new run (another run.name); "
                            f"these may change on resume: backend.{', backend.'.join(RESUMABLE_KEYS)}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings, indent=2, sort_keys=True) + "\n")
    latest = run.run_dir / "checkpoints" / "latest_checkpointed_iteration.txt"
    if run.resume and latest.is_file():
        try:
            return int(latest.read_text().strip())
        except ValueError:
            return None
    return None


def trim_metrics(run_dir: Path, resumed_step: int) -> int:
    """The `metrics.jsonl` lines of the steps verl runs again after resuming at `resumed_step` (a run
    stopped after logging steps it had not checkpointed), dropped; how many. Else a resumed run's file
    would hold two lines for those steps."""
    from beyondagent_core.run_records import read_metrics

    lines = read_metrics(run_dir)
    kept = [line for line in lines if line["step"] <= resumed_step]
    if len(kept) < len(lines):
        write_jsonl(Path(run_dir) / METRICS_FILE, kept)
    return len(lines) - len(kept)


def verl_resume_step(run_dir: Path) -> int | None:
    """The step verl continues from (`trainer.resume_mode: auto`: its latest checkpoint), or None."""
    latest = Path(run_dir) / "checkpoints" / "latest_checkpointed_iteration.txt"
    try:
        return int(latest.read_text().strip())
    except (OSError, ValueError):
        return None


def _differences(old: Any, new: Any, prefix: str = "") -> list[tuple[str, Any, Any]]:
    if isinstance(old, dict) and isinstance(new, dict):
        found = []
        for key in sorted(set(old) | set(new)):
            found += _differences(old.get(key), new.get(key), f"{prefix}.{key}" if prefix else str(key))
        return found
    return [] if old == new else [(prefix, old, new)]


class Trainer(NamedTuple):
    """A started trainer process, its log and the file verl's logger writes its step metrics to."""

    process: subprocess.Popen
    log_path: Path
    verl_metrics: Path


def compose_error(answer: dict[str, Any], spec_path: Any) -> SpecError:
    """verl's answer about a key -> our key-path error (the verl key and the spec key it came from)."""
    origin = answer.get("origin")
    where = f"{spec_path or 'the spec'}, key {origin}" if origin else f"{spec_path or 'the spec'}"
    suggestions = answer.get("suggestions") or []
    hint = (f"did you mean {' or '.join(suggestions)}?" if suggestions else
            "see verl's config reference (verl/trainer/config/_generated_ppo_trainer.yaml) and docs/verl.md")
    return SpecError(answer.get("error") or "verl rejected the config", where=where, hint=hint)


def failure(log_path: Path, code: int) -> RunError:
    """A failed verl run, in one message: the cause found in its log, and where the log is."""
    try:
        text = "\n".join(log_path.read_text(errors="replace").splitlines()[-FAILURE_TAIL_LINES:])
    except OSError:
        text = ""
    for pattern, cause, hint in CAUSES:
        match = re.search(pattern, text)
        if match:
            return RunError(f"verl stopped (exit {code}): {cause}: {_line_of(text, match.start())}",
                            where=f"the whole log: {log_path}", hint=hint)
    errors = [line.strip() for line in text.splitlines()
              if re.match(r"\s*(?:\w+\.)*\w*(?:Error|Exception)\b.*:", line)]
    last = errors[-1][:500] if errors else "no error line found"
    return RunError(f"verl stopped (exit {code}): {last}", where=f"the whole log: {log_path}",
                    hint="the log's last traceback has the details")


def _line_of(text: str, index: int) -> str:
    start = text.rfind("\n", 0, index) + 1
    end = text.find("\n", index)
    return text[start:end if end != -1 else None].strip()[:400]


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    import signal

    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class _MetricsReader:
    """Reads the new complete lines of verl's file logger as they come."""

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0
        self.seen: set[int] = set()

    def new_steps(self) -> list[tuple[int, dict[str, Any]]]:
        try:
            with self.path.open("rb") as handle:
                handle.seek(self.offset)
                chunk = handle.read()
        except FileNotFoundError:
            return []
        end = chunk.rfind(b"\n")
        if end < 0:
            return []
        self.offset += end + 1
        steps = []
        for line in chunk[:end].splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            step = int(record.get("step", len(self.seen)))
            self.seen.add(step)
            steps.append((step, record.get("data") or {}))
        return steps


def write_run_report(run: RunContext) -> Path | None:
    """`report.html` from the `metrics.jsonl` and `samples.jsonl` this backend wrote (the torch backend's
    page: the same metric names), drawn by the installed report plugin; a report that cannot be drawn
    is a warning, never a failed run."""
    from beyondagent_core.reports import write_run_report as ask_for_report

    run_dir = run.run_dir
    try:
        return ask_for_report(run.manager, run_dir)
    except Exception as exc:  # noqa: BLE001 - the run has finished; only its page is missing
        log.warning("verl.report_failed", error=f"{type(exc).__name__}: {exc}",
                    hint=f"beyondagent report {run_dir} draws it again")
        return None
