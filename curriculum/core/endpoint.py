"""An OpenAI-compatible chat endpoint as a ``Policy`` (stdlib ``urllib`` only).

``EndpointPolicy.generate(tasks)`` POSTs each task's messages to ``<url>/chat/completions`` as
``{"model", "messages", "max_tokens", "temperature", "seed"[, "response_format"]}`` and returns
``choices[0].message.content`` with ``usage.completion_tokens`` (or a whitespace token count when
the server sends no usage). ``timeout_s`` bounds each request as a whole, however slowly the
server answers (its sockets are shut down at the deadline); a reply is read up to
``MAX_REPLY_BYTES`` and parsed with nesting too deep for the parser refused. Connection errors,
timeouts, HTTP 429 and 5xx are retried
``retries`` times with exponential backoff; any other failure raises ``EndpointError`` with a
message naming the URL, the status and the start of the server's reply. When ``json_schema`` is
set and the server answers 400, the request is sent once more without ``response_format``.

``resolve_endpoint`` fills URL, model and key from the config or the environment variables
``CURRICULUM_ENDPOINT_URL``, ``CURRICULUM_ENDPOINT_MODEL`` and the one named by ``api_key_env``.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import Field, field_validator

from curriculum.core.config import StrictModel
from curriculum.core.types import Completion, Task


class EndpointConfig(StrictModel):
    """An OpenAI-compatible chat endpoint (e.g. ``vllm serve``) used when ``model: endpoint``."""

    url: str | None = None
    """Base URL (``http://host:8000/v1``) or full ``.../chat/completions`` URL; default: the
    ``CURRICULUM_ENDPOINT_URL`` environment variable."""
    model: str | None = None
    """Model name sent in the request; default: ``CURRICULUM_ENDPOINT_MODEL``, else ``"default"``."""
    api_key_env: str = "CURRICULUM_ENDPOINT_API_KEY"
    """Environment variable holding the bearer token (keys are never written to config files)."""
    timeout_s: float = Field(120.0, gt=0.0, le=3600.0)
    """Seconds before one HTTP request is abandoned, connection and whole reply included."""
    retries: int = Field(2, ge=0, le=10)
    """Extra attempts after a timeout, connection error, HTTP 429 or 5xx."""
    backoff_s: float = Field(2.0, ge=0.0, le=120.0)
    """Wait before retry i is ``backoff_s * 2**i`` seconds."""
    json_schema: bool = False
    """Send ``response_format={"type": "json_schema", ...}`` (vLLM and OpenAI support it); on an
    HTTP 400 the request is retried once without it."""

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value


URL_ENV = "CURRICULUM_ENDPOINT_URL"
MODEL_ENV = "CURRICULUM_ENDPOINT_MODEL"


class EndpointError(RuntimeError):
    """The endpoint could not give an answer (after retries)."""


@dataclass(frozen=True)
class ResolvedEndpoint:
    """Where and how to call: full URL, model name, optional bearer key."""

    url: str
    model: str
    api_key: str | None


def chat_url(url: str) -> str:
    """``http://h:8000`` / ``.../v1`` / ``.../v1/chat/completions`` → the chat completions URL."""
    url = url.rstrip("/")
    if url.endswith("/chat/completions"):
        return url
    if url.endswith("/v1"):
        return url + "/chat/completions"
    return url + "/v1/chat/completions"


def resolve_endpoint(config: EndpointConfig, environ: dict[str, str] | None = None) -> ResolvedEndpoint:
    """URL, model and key from the config, else the environment; ``EndpointError`` without a URL."""
    env = os.environ if environ is None else environ
    url = config.url or env.get(URL_ENV)
    if not url:
        raise EndpointError(f"no endpoint URL: set engineer.endpoint.url or ${URL_ENV}")
    if not url.startswith(("http://", "https://")):
        raise EndpointError(f"endpoint URL {url!r} must start with http:// or https://")
    return ResolvedEndpoint(url=chat_url(url), model=config.model or env.get(MODEL_ENV) or "default",
                            api_key=env.get(config.api_key_env) or None)


class EndpointPolicy:
    """``Policy`` over an OpenAI-compatible ``/v1/chat/completions`` endpoint."""

    def __init__(self, config: EndpointConfig, *, response_schema: dict[str, Any] | None = None,
                 environ: dict[str, str] | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.config = config
        self.endpoint = resolve_endpoint(config, environ)
        self.response_schema = response_schema if config.json_schema else None
        self._sleep = sleep

    def generate(self, tasks: Sequence[Task], *, max_new_tokens: int | None = None,
                 temperature: float | None = None, seed: int = 0) -> list[Completion]:
        return [self._one(task, max_new_tokens or 512, 0.0 if temperature is None else temperature, seed)
                for task in tasks]

    def _one(self, task: Task, max_tokens: int, temperature: float, seed: int) -> Completion:
        body: dict[str, Any] = {"model": self.endpoint.model, "messages": task.messages,
                                "max_tokens": max_tokens, "temperature": temperature, "seed": seed}
        if self.response_schema is not None:
            body["response_format"] = {"type": "json_schema", "json_schema": {
                "name": "generator_config", "schema": self.response_schema}}
        try:
            reply = self._post(body)
        except _BadRequest as err:
            if "response_format" not in body:
                raise EndpointError(str(err)) from None
            body.pop("response_format")
            try:
                reply = self._post(body)
            except _BadRequest as err2:
                raise EndpointError(str(err2)) from None
        return _completion(reply, self.endpoint.url)

    def _post(self, body: dict[str, Any]) -> Any:
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.endpoint.api_key:
            headers["Authorization"] = f"Bearer {self.endpoint.api_key}"
        url = self.endpoint.url
        last = "no attempt made"
        for attempt in range(self.config.retries + 1):
            if attempt:
                self._sleep(self.config.backoff_s * 2 ** (attempt - 1))
            request = urllib.request.Request(url, data=data, headers=headers, method="POST")
            deadline = _Deadline(self.config.timeout_s)
            try:
                with deadline, _opener(deadline).open(request, timeout=self.config.timeout_s) as response:
                    raw = _read_capped(response, url)
            except urllib.error.HTTPError as err:
                detail = _snippet(err.read(4096))
                last = f"HTTP {err.code} from {url}: {detail}"
                if err.code == 429 or err.code >= 500:
                    continue
                if err.code == 400:
                    raise _BadRequest(last) from None
                raise EndpointError(last) from None
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError,
                    http.client.HTTPException) as err:
                reason = getattr(err, "reason", err)
                last = (f"no complete reply from {url} within {self.config.timeout_s:g}s"
                        if deadline.expired else f"cannot reach {url}: {reason}")
                continue
            if deadline.expired:
                last = f"no complete reply from {url} within {self.config.timeout_s:g}s"
                continue
            return _parse_reply(raw, url)
        raise EndpointError(f"{last} (after {self.config.retries + 1} attempts)")


MAX_REPLY_BYTES = 64 << 20
"""Largest reply body read from an endpoint; a bigger one is an ``EndpointError``."""


class _Deadline:
    """One request's whole deadline: when it passes, every socket the request opened is shut
    down, so a server that answers one byte at a time cannot hold a request past
    ``timeout_s`` (the socket timeout alone applies to each read, not to the request)."""

    def __init__(self, seconds: float) -> None:
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> _Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._timer.cancel()

    def watch(self, sock: socket.socket) -> None:
        """Shut ``sock`` down at the deadline (at once when it has passed)."""
        with self._lock:
            self._sockets.append(sock)
            if self.expired:
                _shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _opener(deadline: _Deadline) -> urllib.request.OpenerDirector:
    """An opener whose HTTP(S) connections hand their sockets to ``deadline``."""

    class Connection(http.client.HTTPConnection):
        def connect(self) -> None:
            super().connect()
            deadline.watch(self.sock)

    class SecureConnection(http.client.HTTPSConnection):
        def connect(self) -> None:
            super().connect()
            deadline.watch(self.sock)

    class Handler(urllib.request.HTTPHandler):
        def http_open(self, req):  # type: ignore[override]
            return self.do_open(Connection, req)

    class SecureHandler(urllib.request.HTTPSHandler):
        def https_open(self, req):  # type: ignore[override]
            return self.do_open(SecureConnection, req, context=self._context)

    return urllib.request.build_opener(Handler, SecureHandler)


def _read_capped(response: Any, url: str) -> bytes:
    """The reply body, refused past ``MAX_REPLY_BYTES``."""
    raw = response.read(MAX_REPLY_BYTES + 1)
    if len(raw) > MAX_REPLY_BYTES:
        raise EndpointError(f"{url} answered more than {MAX_REPLY_BYTES:,} bytes; not read")
    return raw


def _parse_reply(raw: bytes, url: str) -> Any:
    """The reply's JSON; nesting too deep for the parser or a huge number is an ``EndpointError``."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError, MemoryError) as exc:
        why = "nested too deeply" if isinstance(exc, RecursionError) else "not JSON"
        raise EndpointError(f"{url} did not answer usable JSON ({why}): {_snippet(raw)}") from None


class _BadRequest(Exception):
    """HTTP 400 (kept apart so a request with ``response_format`` can be retried without it)."""


def _snippet(raw: bytes | str, limit: int = 300) -> str:
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    return " ".join(text.split())[:limit] or "(empty body)"


def _completion(reply: Any, url: str) -> Completion:
    try:
        content = reply["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        try:
            shown = _snippet(json.dumps(reply)[:300])
        except (ValueError, RecursionError):
            shown = "(unprintable)"
        raise EndpointError(f"{url} answered without choices[0].message.content: {shown}") from None
    text = content if isinstance(content, str) else ""
    usage = reply.get("usage") if isinstance(reply, dict) else None
    tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
    return Completion(text=text, num_tokens=int(tokens) if isinstance(tokens, int) else len(text.split()))
