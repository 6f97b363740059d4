"""A small OpenAI-compatible stub server for the prompted-sampling tests (loopback only).

It answers ``POST /v1/chat/completions`` and ``/v1/completions`` with a hypothesis made from
the request's seed and the label the prompt asks for, and usage ``prompt_tokens = 10``,
``completion_tokens = 5``. ``faults`` maps a request seed to the list of what its successive
attempts get: ``"429"``, ``"500"``, ``"slow"`` (answers after ``slow_seconds``), ``"garbage"``
(200 with a body that is not JSON), ``"401"``, or a literal answer text ``"text:..."``;
attempts past the list are answered normally.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

WORDS = {"definitely true": "outdoors", "might be true": "on holiday", "false": "asleep"}


def answer_for(body: dict[str, Any]) -> str:
    """The stub's normal answer: distinct per seed, a word per asked label."""
    if "messages" in body:
        ask = body["messages"][-1]["content"]
    else:
        ask = body["prompt"].split("\n", 1)[0]
    word = next(w for cue, w in WORDS.items() if cue in ask)
    return f"Person {body['seed'] % 100_003} is {word}."


class StubServer:
    """Start with ``with StubServer() as server:``; ``server.url`` is the ``/v1`` base URL."""

    def __init__(self, *, slow_seconds: float = 1.0) -> None:
        self.faults: dict[int, list[str]] = {}
        self.attempts: Counter[int] = Counter()
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.slow_seconds = slow_seconds
        self.answer = answer_for  # body -> answer text (tests may replace it)
        self.lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _send(self, code: int, payload: bytes, headers: dict[str, str] | None = None):
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length))
                with stub.lock:
                    stub.bodies.append(body)
                    stub.headers.append(dict(self.headers))
                    seed = int(body["seed"])
                    attempt = stub.attempts[seed]
                    stub.attempts[seed] += 1
                    plan = stub.faults.get(seed, [])
                action = plan[attempt] if attempt < len(plan) else "ok"
                if action == "429":
                    return self._send(429, b'{"error": "slow down"}', {"Retry-After": "0"})
                if action == "500":
                    return self._send(500, b'{"error": "boom"}')
                if action == "401":
                    return self._send(401, b'{"error": {"message": "invalid api key"}}')
                if action == "garbage":
                    return self._send(200, b"<html>not json")
                if action == "slow":
                    time.sleep(stub.slow_seconds)
                text = action[5:] if action.startswith("text:") else stub.answer(body)
                usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
                if self.path.endswith("/chat/completions"):
                    choice = {"index": 0, "finish_reason": "stop"}
                    choice["message"] = {"role": "assistant", "content": text}
                    kind = "chat.completion"
                else:
                    choice = {"index": 0, "finish_reason": "stop", "text": " " + text}
                    kind = "text_completion"
                payload = {"id": "x", "object": kind, "choices": [choice], "usage": usage}
                self._send(200, json.dumps(payload).encode())

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> StubServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)
