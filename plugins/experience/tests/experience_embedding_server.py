"""A local OpenAI-compatible embeddings endpoint with deterministic vectors: a stand-in for a hosted model.

`POST /v1/embeddings` answers with hashed bag-of-words vectors (each word, lowercased, a few
stopwords left out, adds 1 to the coordinate its hash picks), so texts sharing words are close
and the real `openai` client gets real HTTP. A model named `bow-N` gives N coordinates (`bow`:
256; a request's `dimensions` overrides). `faults` is a queue of HTTP statuses answered before
any vector (500, 429...); `api_key` set, a request without that bearer key gets 401. Every
request body is kept in `requests`.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

STOPWORDS = frozenset("a an and by for in is of on the to".split())


def bag_of_words(text: str, dim: int) -> list[float]:
    vector = [0.0] * dim
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        if word not in STOPWORDS:
            vector[int(hashlib.md5(word.encode()).hexdigest(), 16) % dim] += 1.0
    norm = sum(v * v for v in vector) ** 0.5 or 1.0
    return [v / norm for v in vector]


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b))


class EmbeddingServer:
    def __init__(self, api_key: str | None = None):
        self.api_key = api_key
        self.faults: list[int] = []
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}/v1"

    def texts(self) -> list[str]:
        """Every text embedded so far, in request order."""
        return [text for body in self.requests for text in body["input"]]

    def __enter__(self) -> EmbeddingServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()

    def answer(self, body: dict[str, Any], authorization: str | None) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.requests.append(body)
            if self.api_key is not None and authorization != f"Bearer {self.api_key}":
                return 401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}
            if self.faults:
                status = self.faults.pop(0)
                return status, {"error": {"message": f"scripted fault {status}", "type": "server_error"}}
        model = body["model"]
        dim = body.get("dimensions") or (int(model.split("-")[1]) if model.startswith("bow-") else 256)
        texts = [body["input"]] if isinstance(body["input"], str) else body["input"]
        data = [{"object": "embedding", "index": i, "embedding": bag_of_words(text, dim)}
                for i, text in enumerate(texts)]
        return 200, {"object": "list", "data": data, "model": model,
                     "usage": {"prompt_tokens": sum(len(t.split()) for t in texts), "total_tokens": 0}}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                if self.path.rstrip("/") != "/v1/embeddings":
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
                self._send(*server.answer(body, self.headers.get("authorization")))

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler
