"""The host side: a pool of long-lived sandboxed workers and handles to environment instances.

``SandboxPool.start()`` detects the isolation layers, refuses to run when one is missing
(unless ``allow_degraded``), mirrors the runtime and starts ``config.workers`` workers.
``SandboxPool.load(source)`` takes the worker's pre-forked instance, receives a direct
channel to it (a socket-pair end passed over the control socket) and sends it the program.
``EnvHandle.reset`` / ``step`` / ``call`` go straight to the instance with a per-call
deadline enforced here, validate every answer as untrusted input (``replies.py``: a strict
schema, numbers checked without conversions that could raise, forged failure kinds refused)
and raise only ``SandboxFailure`` with a structured ``Failure``: a malformed instance reply
is a ``bad_return`` (the instance is closed), a malformed zygote reply a ``crash`` of the
worker. A late, dead or oversized answer closes the instance: the zygote
kills it and everything it started. A worker whose zygote misses a control deadline (plus
``supervisor_grace_s``) or dies is killed as a whole process group and restarted on the next
``load``, so no call hangs and the pool keeps serving.

Workers are launched from one long-lived launcher thread: bubblewrap's die-with-parent is
tied to the *thread* that forked it, so a short-lived caller thread must not be the parent.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from testbeds.spade.sandbox import _worker, replies
from testbeds.spade.sandbox.config import (Failure, ResetResult, SandboxConfig, SandboxFailure,
                                     StepResult)
from testbeds.spade.sandbox.layers import (DoctorReport, LayerStatus, Runtime, degraded_env,
                                     detect_layers, drop_privileges, minimal_env,
                                     prepare_runtime, worker_command)

FATAL_KINDS = {"timeout", "crash", "memory_limit"}
_SIGNAL_NUMBERS = {int(s) for s in signal.Signals}
STDERR_KEEP = 16_384


def fail(kind: str, detail: str, **extra: Any) -> SandboxFailure:
    """A ``SandboxFailure`` built from its parts."""
    return SandboxFailure(Failure(kind=kind, detail=detail, **extra))


class Worker:
    """One sandboxed zygote process and the control socket to it."""

    def __init__(self, index: int, config: SandboxConfig, runtime: Runtime, bwrap: str | None,
                 launcher: ThreadPoolExecutor, seccomp: bool) -> None:
        self.index, self.config, self.runtime, self.bwrap = index, config, runtime, bwrap
        self.launcher, self.seccomp = launcher, seccomp
        self.proc: subprocess.Popen | None = None
        self.ctl: socket.socket | None = None
        self.report: dict = {}
        self.stderr = bytearray()
        self.restarts = 0

    # -- life cycle ---------------------------------------------------------------------------
    def start(self) -> dict:
        """Launch the worker, send its settings and wait for its ready report."""
        self.ctl, theirs = socket.socketpair()
        command = worker_command(self.config, self.runtime, self.bwrap, theirs.fileno())
        env = minimal_env() if self.bwrap else degraded_env(self.runtime)
        self.stderr = bytearray()
        try:
            self.proc = self.launcher.submit(
                subprocess.Popen, command, env=env, pass_fds=(theirs.fileno(), *self.runtime.fds),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                start_new_session=True, **drop_privileges(self.config)).result()
        finally:
            theirs.close()
        threading.Thread(target=self._drain_stderr, args=(self.proc,), daemon=True).start()
        self.ctl.setblocking(False)
        reply = self.request({"op": "init", "settings": self._settings()},
                             self.config.start_deadline_s)
        if not reply["ok"]:
            self.kill()
            error = reply["error"]
            raise fail("sandbox_unavailable", f"worker {self.index} did not start: "
                       f"{error['detail']}; stderr: {bytes(self.stderr).decode(errors='replace')[-2000:]}")
        self.report = reply["value"]
        return self.report

    def _settings(self) -> dict:
        config = self.config
        return {
            "memory_mb": config.memory_mb, "instance_cpu_s": config.instance_cpu_s,
            "max_processes": config.max_processes, "max_open_files": config.max_open_files,
            "max_file_mb": config.max_file_mb, "max_scratch_files": config.max_scratch_files,
            "max_output_chars": config.max_output_chars,
            "max_traceback_chars": config.max_traceback_chars,
            "max_reply_bytes": config.max_reply_bytes, "max_request_bytes": config.max_request_bytes,
            "allowed_modules": list(config.allowed_modules),
            "enforce_import_allowlist": config.enforce_import_allowlist,
            "prelude_source": config.prelude_source, "seccomp": self.seccomp,
            "own_pid_namespace": self.bwrap is not None,
            # degraded mode (no mount namespace) runs the interpreter through the held runtime
            "keep_fds": [] if self.bwrap is not None else list(self.runtime.fds),
        }

    def _drain_stderr(self, proc: subprocess.Popen) -> None:
        """Keep the first ``STDERR_KEEP`` bytes of the worker's stderr, discard the rest."""
        while chunk := proc.stderr.read1(65536):
            if len(self.stderr) < STDERR_KEEP:
                self.stderr += chunk[: STDERR_KEEP - len(self.stderr)]

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the worker: bwrap's process group and every process below it (the sandbox
        runs in its own session; die-with-parent and the pid namespace would also take it down
        once bwrap is gone)."""
        if self.proc is not None:
            below = self.sandbox_pids()
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            for pid in below:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            self.proc.wait()
            self.proc = None
        if self.ctl is not None:
            self.ctl.close()
            self.ctl = None

    def restart(self) -> None:
        self.kill()
        self.restarts += 1
        self.start()

    # -- control requests ---------------------------------------------------------------------
    def request(self, message: dict, deadline_s: float) -> dict:
        """Send one control request and return the decoded reply; kill the worker if it is late
        (``deadline_s`` plus ``supervisor_grace_s``) or dead."""
        deadline = time.monotonic() + deadline_s + self.config.supervisor_grace_s
        try:
            _write_frame(self.ctl.fileno(), json.dumps(message).encode(), deadline)
            payload, fds = _read_control_frame(self.ctl, deadline)
        except (_worker.FrameError, OSError, AttributeError) as exc:
            return self._give_up(exc, deadline_s)
        for fd in fds:  # replies never carry descriptors
            os.close(fd)
        try:
            return replies.control_reply(payload, reply_limits(self.config))
        except replies.ReplyError as exc:
            return self._give_up(exc, deadline_s)

    def take_instance(self, deadline_s: float) -> tuple[int, int]:
        """Receive the next pre-forked instance: its pid in the sandbox and a channel fd to it."""
        deadline = time.monotonic() + deadline_s + self.config.supervisor_grace_s
        try:
            payload, fds = _read_control_frame(self.ctl, deadline)
        except (_worker.FrameError, OSError, AttributeError) as exc:
            raise SandboxFailure(Failure(**self._give_up(exc, deadline_s)["error"])) from None
        try:
            pid = replies.instance_offer(payload, reply_limits(self.config))
            if len(fds) != 1:
                raise replies.ReplyError(f"instance offer with {len(fds)} descriptors, not 1")
        except replies.ReplyError as exc:
            for fd in fds:
                os.close(fd)
            self.kill()
            raise fail("crash", f"worker {self.index}: {exc.detail}; worker killed") from None
        os.set_blocking(fds[0], False)
        return pid, fds[0]

    def _give_up(self, exc: Exception, deadline_s: float) -> dict:
        self.kill()
        if getattr(exc, "reason", None) == "timeout":
            return _worker.error("timeout", f"worker gave no answer within {deadline_s:g}s plus "
                                 f"{self.config.supervisor_grace_s:g}s grace; worker killed")
        return _worker.error("crash", f"sandbox worker died ({exc!r}); worker killed")

    def sandbox_pids(self) -> list[int]:
        """Host pids of every process below the worker's launcher (for tests and diagnostics)."""
        if self.proc is None:
            return []
        children: dict[int, list[int]] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat", "rb") as handle:
                        fields = handle.read().rsplit(b")", 1)[1].split()
                except OSError:
                    continue
                if fields[0] not in (b"Z", b"X"):
                    children.setdefault(int(fields[1]), []).append(int(entry))
        found, stack = [], [self.proc.pid]
        while stack:
            for child in children.get(stack.pop(), []):
                found.append(child)
                stack.append(child)
        return found


def _write_frame(fd: int, payload: bytes, deadline: float) -> None:
    """Write one frame to a non-blocking fd, giving up at ``deadline``."""
    view = memoryview(_worker.HEADER.pack(len(payload)) + payload)
    while view:
        if not _worker.wait_ready(fd, deadline - time.monotonic(), write=True):
            raise _worker.FrameError("timeout")
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            continue


def _read_control_frame(sock: socket.socket, deadline: float) -> tuple[bytes, list[int]]:
    """Read one frame and any descriptors sent with it (SCM_RIGHTS) from the control socket."""
    buffer, fds, need, size = bytearray(), [], _worker.HEADER.size, None
    while True:
        while len(buffer) < need:
            if not _worker.wait_ready(sock.fileno(), deadline - time.monotonic()):
                for fd in fds:
                    os.close(fd)
                raise _worker.FrameError("timeout")
            try:
                data, received, _, _ = socket.recv_fds(sock, need - len(buffer), 4)
            except BlockingIOError:
                continue
            fds += received
            if not data:
                for fd in fds:
                    os.close(fd)
                raise _worker.FrameError("eof")
            buffer += data
        if size is not None:
            return bytes(buffer[_worker.HEADER.size:]), fds
        (size,) = _worker.HEADER.unpack(buffer)
        need += size


class EnvHandle:
    """One environment instance in a sandboxed worker, reached over its own channel.

    Every call has the configured deadline, enforced here; a late, dead or oversized answer
    closes the instance (the zygote then kills it and everything it started). Not thread-safe.
    """

    def __init__(self, pool: SandboxPool, worker: Worker, pid: int, channel: int) -> None:
        self.pool, self.worker, self.pid, self.channel = pool, worker, pid, channel
        self.class_name = ""
        self.closed = False

    def __enter__(self) -> EnvHandle:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        """A handle dropped without ``close`` still gives its worker back."""
        if not getattr(self, "closed", True):
            try:
                self.close()
            except Exception:  # noqa: BLE001 - never raise from a finaliser
                pass

    def reset(self, seed: int | None = None) -> ResetResult:
        """Call ``env.reset(seed=seed)``; the answer must be ``(obs: str, info: dict)``."""
        reply = self._call({"op": "reset", "seed": seed})
        value = reply.value
        if not (isinstance(value, list) and len(value) == 2):
            raise self._bad(f"reset must return (obs, info), got {_shape(value)}")
        obs, info = value
        self._check_obs(obs)
        if not isinstance(info, dict):
            raise self._bad(f"info must be a dict, got {type(info).__name__}")
        return ResetResult(obs=obs, info=info, output=reply.output)

    def step(self, action: Any) -> StepResult:
        """Call ``env.step(action)``; the answer must be
        ``(obs: str, reward: finite float, terminated: bool, truncated: bool, info: dict)``."""
        reply = self._call({"op": "step", "action": action})
        value = reply.value
        if not (isinstance(value, list) and len(value) == 5):
            raise self._bad(f"step must return a 5-tuple, got {_shape(value)}")
        obs, reward, terminated, truncated, info = value
        self._check_obs(obs)
        if isinstance(reward, bool) or not isinstance(reward, (int, float)):
            raise self._bad(f"reward must be a number, got {type(reward).__name__}")
        finite = replies.finite_float(reward)
        if finite is None:
            text = str(reward) if isinstance(reward, float) else f"an integer of {len(str(abs(reward)))} digits"
            raise self._bad(f"reward must be finite and fit a float, got {text}")
        if not isinstance(terminated, bool) or not isinstance(truncated, bool):
            raise self._bad("terminated and truncated must be bools, got "
                            f"{type(terminated).__name__} and {type(truncated).__name__}")
        if not isinstance(info, dict):
            raise self._bad(f"info must be a dict, got {type(info).__name__}")
        return StepResult(obs=obs, reward=finite, terminated=terminated,
                          truncated=truncated, info=info, output=reply.output)

    def call(self, method: str, *args: Any) -> Any:
        """Call a public method of the environment with JSON arguments; return its JSON result."""
        return self._call({"op": "call", "method": method, "args": list(args)}).value

    def close(self) -> dict:
        """Kill the instance (and anything it started) and give the worker back to the pool.

        Returns the zygote's account of the instance (``died``, ``signal``, ``killed``...)."""
        return self._end(expect_dead=False)

    # -- internals ------------------------------------------------------------------------------
    def _load(self, source: str, class_name: str | None) -> None:
        reply = self._call({"op": "load", "source": source, "class_name": class_name},
                           self.pool.config.load_deadline_s)
        if not isinstance(reply.value, str):
            self._end(expect_dead=False)
            raise self._bad(f"load answered {type(reply.value).__name__}, not the class name")
        self.class_name = reply.value

    def _call(self, message: dict, deadline_s: float | None = None) -> replies.InstanceReply:
        if self.closed:
            raise fail("closed", "the environment instance is closed")
        deadline_s = deadline_s or self.pool.config.call_deadline_s
        deadline = time.monotonic() + deadline_s
        try:
            request = json.dumps(message, allow_nan=False).encode()
        except (TypeError, ValueError, RecursionError) as exc:
            raise fail("bad_call", f"the request cannot be sent as JSON: {exc}"[:500]) from None
        if len(request) > self.pool.config.max_request_bytes:
            raise fail("bad_call", f"request of {len(request)} bytes exceeds max_request_bytes "
                       f"({self.pool.config.max_request_bytes})")
        try:
            _write_frame(self.channel, request, deadline)
            payload = _worker.read_frame(self.channel, self.pool.config.max_reply_bytes, deadline)
        except (_worker.FrameError, OSError) as exc:
            raise self._fatal(getattr(exc, "reason", "eof"), exc, deadline_s) from None
        try:
            reply = replies.instance_reply(payload, reply_limits(self.pool.config))
        except replies.ReplyError as exc:
            self._end(expect_dead=False)
            raise fail("bad_return", f"malformed reply, instance closed: {exc.detail}") from None
        if reply.failure is None:
            return reply
        if reply.failure.kind in FATAL_KINDS:
            self._end(expect_dead=False)
        raise SandboxFailure(reply.failure)

    def _fatal(self, reason: str, exc: Exception, deadline_s: float) -> SandboxFailure:
        """End the instance after a transport failure and say why it happened."""
        if reason == "timeout":
            self._end(expect_dead=False)
            return fail("timeout", f"no answer within the {deadline_s:g}s deadline")
        if reason == "too_large":
            self._end(expect_dead=False)
            return fail("bad_return", getattr(exc, "detail", str(exc)))
        outcome = self._end(expect_dead=True)
        if isinstance(outcome.get("limit"), str):  # the zygote killed it at a scratch limit
            return fail("memory_limit", outcome["limit"][:500])
        number = outcome.get("signal")
        if isinstance(number, bool) or not isinstance(number, int) or not 0 < number < 128:
            number = None  # the zygote's account is checked like any reply
        if number == signal.SIGXCPU:
            return fail("timeout", "CPU-time limit of the instance exceeded", signal=number)
        if number is not None:
            name = signal.Signals(number).name if number in _SIGNAL_NUMBERS else f"signal {number}"
            return fail("crash", f"killed by signal {name}", signal=number)
        if "exit_code" in outcome:
            return fail("crash", f"exited with status {str(outcome['exit_code'])[:20]}")
        return fail("crash", str(outcome.get("detail", "the instance closed its channel"))[:500])

    def _end(self, expect_dead: bool) -> dict:
        if self.closed:
            return {}
        self.closed = True
        os.close(self.channel)
        reply = self.worker.request({"op": "close", "expect_dead": expect_dead},
                                    self.pool.config.call_deadline_s)
        self.pool._release(self.worker)
        return reply["value"] if reply.get("ok") else {"detail": reply["error"]["detail"]}

    def _check_obs(self, obs: Any) -> None:
        if not isinstance(obs, str):
            raise self._bad(f"obs must be a str, got {type(obs).__name__}")
        if len(obs) > self.pool.config.max_obs_chars:
            raise self._bad(f"obs of {len(obs)} characters exceeds {self.pool.config.max_obs_chars}")

    @staticmethod
    def _bad(detail: str) -> SandboxFailure:
        return fail("bad_return", detail)


def reply_limits(config: SandboxConfig) -> replies.ReplyLimits:
    """The limits every reply is checked against."""
    return replies.ReplyLimits(max_depth=config.max_reply_depth,
                               max_int_digits=config.max_reply_int_digits)


def _shape(value: Any) -> str:
    if isinstance(value, list):
        return f"list of length {len(value)}"
    return type(value).__name__


class SandboxPool:
    """A fixed set of sandboxed workers; ``load`` borrows one per environment instance."""

    def __init__(self, config: SandboxConfig | None = None) -> None:
        self.config = config or SandboxConfig()
        self.workers: list[Worker] = []
        self.report: DoctorReport | None = None
        self._idle: list[Worker] = []
        self._cond = threading.Condition()
        self._launcher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sandbox-launcher")

    def __enter__(self) -> SandboxPool:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def start(self) -> DoctorReport:
        """Detect the layers, refuse if any is missing (unless degraded mode is allowed), start."""
        layers, bwrap = detect_layers(self.config)
        missing = [layer.name for layer in layers if not layer.active]
        if missing and not self.config.allow_degraded:
            raise fail("sandbox_unavailable", f"isolation layers unavailable: {missing}; "
                       + "; ".join(f"{l.name}: {l.detail}" for l in layers if not l.active)
                       + " (set allow_degraded=True to run anyway)")
        seccomp = any(layer.name == "seccomp" and layer.active for layer in layers)
        runtime = prepare_runtime(self.config)  # held open by descriptor until close
        self.workers = [Worker(i, self.config, runtime, bwrap, self._launcher, seccomp)
                        for i in range(self.config.workers)]
        try:
            for worker in self.workers:
                worker.start()
        except SandboxFailure:
            self.close()
            raise
        self._idle = list(self.workers)
        self.report = DoctorReport(layers=_confirm(layers, self.workers[0].report),
                                   worker=self.workers[0].report)
        return self.report

    def load(self, source: str, class_name: str | None = None,
             timeout: float | None = None) -> EnvHandle:
        """Start a fresh instance of the program's environment class in an idle worker.

        Waits up to ``timeout`` seconds (None: forever) for a worker to be free.
        """
        worker = self._acquire(timeout)
        try:
            if not worker.alive:
                worker.restart()
            pid, channel = worker.take_instance(self.config.load_deadline_s)
        except BaseException:
            self._release(worker)
            raise
        handle = EnvHandle(self, worker, pid, channel)
        try:
            handle._load(source, class_name)
        except BaseException:
            handle.close()
            raise
        return handle

    def close(self) -> None:
        """Kill every worker."""
        for worker in self.workers:
            worker.kill()
        if self.workers:
            self.workers[0].runtime.close()
        self.workers, self._idle = [], []
        self._launcher.shutdown(wait=False)

    def _acquire(self, timeout: float | None) -> Worker:
        with self._cond:
            if not self._cond.wait_for(lambda: self._idle, timeout):
                raise fail("timeout", f"no sandbox worker became free within {timeout}s")
            return self._idle.pop()

    def _release(self, worker: Worker) -> None:
        with self._cond:
            if worker in self.workers:
                self._idle.append(worker)
                self._cond.notify()


def _confirm(layers: list[LayerStatus], worker_report: dict) -> list[LayerStatus]:
    """Amend the host-side detection with what the worker says is actually in force."""
    confirmed = []
    for layer in layers:
        if layer.name == "seccomp" and layer.active:
            active = worker_report.get("seccomp_mode") == "2" and worker_report.get("no_new_privs")
            layer = LayerStatus(name="seccomp", active=bool(active),
                                detail=f"{worker_report.get('seccomp')}, Seccomp mode "
                                       f"{worker_report.get('seccomp_mode')}, NoNewPrivs "
                                       f"{worker_report.get('no_new_privs')}")
        if layer.name == "uid":
            uid = worker_report.get("uid")
            layer = LayerStatus(name="uid", active=uid != 0,
                                detail=f"{layer.detail}; worker reports uid {uid}")
        confirmed.append(layer)
    return confirmed


def doctor(config: SandboxConfig | None = None) -> DoctorReport:
    """Start a one-worker pool (degraded allowed, to see everything) and report every layer."""
    config = (config or SandboxConfig()).model_copy(update={"workers": 1, "allow_degraded": True})
    pool = SandboxPool(config)
    try:
        return pool.start()
    except SandboxFailure as exc:
        layers, _ = detect_layers(config)
        return DoctorReport(layers=layers, worker={"error": exc.failure.model_dump()})
    finally:
        pool.close()
