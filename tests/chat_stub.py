"""An OpenAI-compatible ``/v1/chat/completions`` server on 127.0.0.1 for tests of endpoint clients.

``ChatStub(replies)`` answers the n-th POST with ``replies[n]`` (the last one repeats): a
``(status, body)`` pair, or a plain body answered with status 200; a body is a dict (sent as
JSON) or a string (sent as is, e.g. malformed JSON). Every request is recorded as ``{"path",
"auth", "body"}``. Use it as a context manager, or call ``start`` and ``close``.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any


def chat_reply(text: str, tokens: int | None = 42) -> dict[str, Any]:
    """A completion whose one choice says ``text`` (with ``usage`` when ``tokens`` is given)."""
    reply: dict[str, Any] = {"choices": [{"message": {"role": "assistant", "content": text}}]}
    if tokens is not None:
        reply["usage"] = {"completion_tokens": tokens}
    return reply


class ChatStub:
    def __init__(self, replies: list[Any]) -> None:
        self.replies = [r if isinstance(r, tuple) else (200, r) for r in replies]
        self.requests: list[dict[str, Any]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length", 0))
                stub.requests.append({"path": self.path, "auth": self.headers.get("Authorization"),
                                      "body": json.loads(self.rfile.read(length))})
                status, body = stub.replies[min(len(stub.requests), len(stub.replies)) - 1]
                data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> ChatStub:
        self.thread.start()
        return self

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> ChatStub:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()
