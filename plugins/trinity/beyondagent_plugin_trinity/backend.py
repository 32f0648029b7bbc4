"""The `trinity` backend: the spec -> Trinity-RFT's config, the tasks -> tasksets, `trinity run` as a child.

    train(data, run):
        venv   = trinity's cached venv (built on first use)
        files  = <run_dir>/trinity/: data/train/train.jsonl (every epoch's mix), data/val/test.jsonl,
                 spec.yaml (for the workflow runners), trinity_config.yaml (composed and validated
                 by trinity's own check_and_update)
        check  = our Workflow and ADVANTAGE_FN registered in trinity; the GPUs trinity was told about exist
        launch = ray start --head (unless backend.ray_address or a running Ray), then
                 trinity run --config trinity_config.yaml --plugin-dir <our trinity_plugin/>   (in the venv)
                 output -> <run_dir>/trinity/trinity.log; step metrics -> <run_dir>/trinity/trinity_metrics.<role>.jsonl

`describe(run)` (`beyondagent run --dry-run`) does the first three and prints the composed config.
A failure inside trinity becomes a `RunError` with the last error line of its log and the log's path.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import yaml

from beyondagent_core import reproduce
from beyondagent_core.context import RunContext, TrainingData
from beyondagent_core.errors import RunError, SpecError
from beyondagent_core.logs import get_logger
from beyondagent_core.worker_spec import worker_spec
from beyondagent_plugin_trinity.config import TrinityConfig
from beyondagent_plugin_trinity.mapping import RunFiles, trinity_overrides

log = get_logger("beyondagent.trinity")

TRINITY_DIR = "trinity"
CONFIG_FILE = "trinity_config.yaml"
COMPOSE_TIMEOUT_S = 600
SECRET_VAR = "BEYONDAGENT_TRINITY_SECRET_{}"


class TrinityBackend:
    def __init__(self, config: TrinityConfig):
        self.config = config

    # --- dry run ------------------------------------------------------------------------

    def describe(self, run: RunContext) -> str:
        """Compose and validate trinity's config for this spec; write it and return it as text."""
        data_dir = run.run_dir.resolve() / TRINITY_DIR / "data"
        has_val = bool(run.spec.component("tasks.val") and run.spec.component("tasks.val").name)
        files = self._files(run, train_dir=data_dir / "train", val_dir=data_dir / "val" if has_val else None)
        venv = self._venv()
        answer = self._compose(run, files, venv)
        text = Path(answer["config"]).read_text()
        registration = answer["registration"]
        status = (f"registered ({', '.join(registration['targets'].values())})"
                  if registration["registered"] else f"NOT registered: {registration['error']}")
        cluster = answer["cluster"]
        return (f"Trinity-RFT config (composed by trinity-rft {answer['trinity']} and checked by its check_and_update "
                f"in {answer['total_s']:.0f} s; mode {answer['mode']}: {cluster['explorer_gpus']} explorer + "
                f"{cluster['trainer_gpus']} trainer GPU(s) of the {cluster['gpus']} the spec declares), written to "
                f"{answer['config']}:\n{text}\n"
                f"`beyondagent` in trinity's WORKFLOWS, ADVANTAGE_FN and MONITOR: {status}\n"
                f"  {files.spec_path}: the spec's workflow, env and judges run inside trinity's workflow runners\n"
                f"trinity's venv: {venv.path}")

    # --- training -----------------------------------------------------------------------

    def train(self, data: TrainingData, run: RunContext) -> dict[str, Any]:
        from beyondagent_plugin_trinity.data import write_tasksets

        config = self.config
        venv = self._venv()
        trinity_dir = run.run_dir.resolve() / TRINITY_DIR
        try:
            written = write_tasksets(data, trinity_dir / "data", epochs=config.epochs, total_steps=config.total_steps,
                                     batch_size=config.batch_size)
        except ValueError as exc:
            raise RunError(str(exc), where="the mixer's tasks") from None
        if written.steps < 1:
            raise RunError(f"{written.rows} training rows make no full batch of backend.batch_size={config.batch_size}",
                           where=f"{run.spec.path}, key backend.batch_size", hint="lower batch_size or add tasks")
        log.info("trinity.data", rows=written.rows, epochs=written.epochs, steps=written.steps)
        run.planned_steps = written.steps  # an interrupted run says "stopped at step 20 of 80"
        files = self._files(run, train_dir=written.train_dir, val_dir=written.val_dir)
        answer = self._compose(run, files, venv)
        reproduce.add_launched(run.run_dir, run.spec, backend="trinity", device=config.device)
        self._preflight(answer)
        return self._launch(run, Path(answer["config"]), venv, steps=written.steps)

    def _preflight(self, answer: dict[str, Any]) -> None:
        registration = answer["registration"]
        if not registration["registered"]:
            raise RunError(f"our Workflow is not registered in trinity: {registration['error']}",
                           where=f"trinity's plugin dir {registration['plugin_dir']}",
                           hint="beyondagent trinity setup --rebuild")
        gpus = answer.get("gpus", [])
        on_cluster = self.config.ray_address is not None or os.environ.get("RAY_ADDRESS")
        if not on_cluster and len(gpus) < self.config.gpus_per_node:
            raise RunError(f"Trinity-RFT needs {self.config.gpus_per_node} GPU(s) on this node (backend.gpus_per_node) "
                           f"but torch in trinity's venv sees {len(gpus)}: its explorer is vLLM and its trainer "
                           "hard-codes CUDA", where="backend.gpus_per_node",
                           hint="run on a machine with NVIDIA GPUs (docs/trinity.md), or join a Ray cluster with "
                                "backend.ray_address; on a CPU, `beyondagent run SPEC --dry-run` composes and checks "
                                "the config, and `backend: torch` trains the same spec")

    def _launch(self, run: RunContext, config_path: Path, venv: Any, *, steps: int) -> dict[str, Any]:
        from beyondagent_plugin_trinity.registration import PLUGIN_DIR

        trinity_dir = config_path.parent
        log_path = trinity_dir / "trinity.log"
        env = venv.environ({"TRINITY_PLUGIN_DIRS": str(PLUGIN_DIR), "PYTHONUNBUFFERED": "1",
                            **worker_spec(run.spec, SECRET_VAR)[1]})
        if self.config.ray_address:
            env["RAY_ADDRESS"] = self.config.ray_address
        started_ray = False
        with log_path.open("a") as out:
            if not self.config.ray_address and subprocess.run([str(venv.bin / "ray"), "status"], env=env,
                                                                capture_output=True, check=False).returncode != 0:
                out.write("\n==== beyondagent: ray start --head ====\n")
                out.flush()
                subprocess.run([str(venv.bin / "ray"), "start", "--head", "--disable-usage-stats"], env=env,
                               stdout=out, stderr=subprocess.STDOUT, check=True)
                started_ray = True
            log.info("trinity.started", config=str(config_path), log=str(log_path), steps=steps)
            started = time.monotonic()
            out.write("\n==== beyondagent: trinity run ====\n")
            out.flush()
            process = subprocess.Popen([str(venv.bin / "trinity"), "run", "--config", str(config_path),
                                        "--plugin-dir", str(PLUGIN_DIR)], stdout=out, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, env=env, cwd=str(trinity_dir), start_new_session=True)
            try:
                code = process.wait(timeout=self.config.timeout_s)
            except subprocess.TimeoutExpired:
                _stop(process)
                raise RunError(f"Trinity-RFT ran past backend.timeout_s={self.config.timeout_s} s and was stopped",
                               where=str(log_path)) from None
            except BaseException:
                _stop(process)
                raise
            finally:
                if started_ray:
                    subprocess.run([str(venv.bin / "ray"), "stop"], env=env, stdout=out, stderr=subprocess.STDOUT,
                                   check=False)
        if code != 0:
            raise failure(log_path, code)
        seconds = round(time.monotonic() - started, 1)
        log.info("trinity.finished", seconds=seconds)
        return {"trinity/seconds": seconds, "trinity/log": str(log_path)}

    # --- pieces ---------------------------------------------------------------------------

    def _venv(self) -> Any:
        """trinity's venv; the first time it is built (minutes), with its steps shown on stderr."""
        from rich.console import Console

        from beyondagent_plugin_trinity.setup_command import ensure

        venv = ensure(console=Console(stderr=True, highlight=False))
        log.info("trinity.venv", path=str(venv.path), built_in_s=venv.info().get("seconds"))
        return venv

    def _files(self, run: RunContext, *, train_dir: Path, val_dir: Path | None) -> RunFiles:
        run_dir = run.run_dir.resolve()  # every path trinity sees is absolute: its workers have other cwds
        trinity_dir = run_dir / TRINITY_DIR
        trinity_dir.mkdir(parents=True, exist_ok=True)
        spec_path = trinity_dir / "spec.yaml"
        spec_path.write_text(yaml.safe_dump(worker_spec(run.spec, SECRET_VAR)[0], sort_keys=False, allow_unicode=True))
        return RunFiles(run_dir=run_dir, spec_path=spec_path, train_dir=train_dir, val_dir=val_dir)

    def _compose(self, run: RunContext, files: RunFiles, venv: Any) -> dict[str, Any]:
        overrides = trinity_overrides(run.spec, self.config, files, model_path=run.spec.model.path)
        trinity_dir = files.spec_path.parent
        request_path = trinity_dir / "compose_request.json"
        out = trinity_dir / CONFIG_FILE
        request_path.write_text(json.dumps({"model_path": run.spec.model.path, "out": str(out),
                                            "overrides": [o.as_list() for o in overrides]}, default=str))
        try:
            result = venv.run(["-m", "beyondagent_plugin_trinity.compose", str(request_path)],
                              timeout=COMPOSE_TIMEOUT_S, cwd=str(trinity_dir))
        except subprocess.TimeoutExpired:
            raise RunError(f"composing trinity's config took over {COMPOSE_TIMEOUT_S} s", where=str(venv.path)) from None
        lines = result.stdout.strip().splitlines()
        try:
            answer = json.loads(lines[-1])
        except (IndexError, ValueError):
            raise RunError(f"composing trinity's config failed (exit {result.returncode}):\n{result.stderr[-2500:]}",
                           where=str(venv.path), hint="beyondagent trinity setup (checks trinity's venv)") from None
        if not answer.get("ok"):
            raise compose_error(answer, run.spec.path)
        log.info("trinity.composed", config=answer["config"], seconds=answer["total_s"])
        return answer



def compose_error(answer: dict[str, Any], spec_path: Any) -> SpecError:
    """trinity's answer about a key -> our key-path error (the trinity key and the spec key it came from)."""
    origin = answer.get("origin")
    where = f"{spec_path or 'the spec'}, key {origin}" if origin else f"{spec_path or 'the spec'}"
    suggestions = answer.get("suggestions") or []
    hint = (f"did you mean {' or '.join(suggestions)}?" if suggestions else
            "see Trinity-RFT's config reference (trinity/common/config.py) and docs/trinity.md")
    return SpecError(answer.get("error") or "Trinity-RFT rejected the config", where=where, hint=hint)


def failure(log_path: Path, code: int) -> RunError:
    """A failed trinity run, in one message: the last error line of its log, and where the log is."""
    try:
        text = "\n".join(log_path.read_text(errors="replace").splitlines()[-300:])
    except OSError:
        text = ""
    errors = [line.strip() for line in text.splitlines() if re.match(r"\s*(?:\w+\.)*\w*(?:Error|Exception)\b.*:", line)]
    last = errors[-1][:500] if errors else "no error line found"
    return RunError(f"Trinity-RFT stopped (exit {code}): {last}", where=f"the whole log: {log_path}",
                    hint="the log's last traceback has the details")


def _stop(process: subprocess.Popen) -> None:
    import signal

    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
