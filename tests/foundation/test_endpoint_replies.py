"""An endpoint's reply is untrusted: a slow drip cannot hold a request past ``timeout_s`` and a
reply nested too deeply is an ``EndpointError``, not a ``RecursionError``."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from curriculum.core.endpoint import EndpointConfig, EndpointError, EndpointPolicy
from curriculum.core.types import Task

DRIP_FOR_S = 8.0


class _Hostile(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:  # quiet
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path.startswith("/deep"):
            body = b"[" * 200_000 + b"]" * 200_000
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(200)
        self.send_header("Content-Length", "100000")
        self.end_headers()
        stop = time.monotonic() + DRIP_FOR_S
        try:
            while time.monotonic() < stop:  # one byte every 0.2 s: each read is "on time"
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(0.2)
        except OSError:
            pass


@pytest.fixture(scope="module")
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Hostile)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def _policy(url: str) -> EndpointPolicy:
    return EndpointPolicy(EndpointConfig(url=url, timeout_s=1.0, retries=0, backoff_s=0.0))


def _task() -> Task:
    return Task(id="t", messages=[{"role": "user", "content": "hi"}])


def test_a_dripped_reply_is_abandoned_at_the_request_deadline(server):
    start = time.monotonic()
    with pytest.raises(EndpointError, match="within 1s"):
        _policy(f"{server}/drip/v1").generate([_task()])
    assert time.monotonic() - start < 3.0


def test_a_deeply_nested_reply_is_an_endpoint_error(server):
    with pytest.raises(EndpointError, match="nested too deeply"):
        _policy(f"{server}/deep/v1").generate([_task()])
