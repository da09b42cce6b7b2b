"""The sandboxed worker: a zygote that forks one fresh child per environment instance.

This file runs *inside* the sandbox (under bubblewrap, as an unprivileged uid) with the
interpreter flags ``-I -S -B``, so it imports nothing but the standard library. The host
imports it too, for the frame codec (``write_frame`` / ``read_frame``) it shares.

Life of a worker:

1. Read the ``init`` frame (limits, allowlist, prelude) from the control socket.
2. Harden itself: non-dumpable, rlimits (no core, file size, open files, processes),
   pre-import the allowed modules and run the trusted prelude, then load the seccomp filter
   (which also sets no-new-privileges). Answer with a report of what is in force.
3. Fork the next instance ahead of time and pass the host (SCM_RIGHTS) its end of a socket
   pair to it. The host sends ``load`` / ``reset`` / ``step`` / ``call`` straight to the
   instance with its own deadlines; the instance compiles the program, builds the
   environment and answers. On ``close`` (normal end, deadline, or dead channel) the zygote
   kills the instance and every other process left in the sandbox (daemons included),
   reports how the instance had ended, and offers the next one.

Frames are a 4-byte big-endian length followed by UTF-8 JSON. The program's own prints go to
a bounded in-memory buffer and its raw fd 1/2 to ``/dev/null``, so nothing it writes can
reach the protocol.
"""
from __future__ import annotations

import builtins
import gc
import io
import json
import os
import select
import signal
import socket
import struct
import sys
import time
import traceback

HEADER = struct.Struct(">I")
ENV_MODULE = "__env__"
FATAL_SIGNAL_NAMES = {s.value: s.name for s in signal.Signals}
SCRATCH_CHECK_S = 0.01
"""How often the zygote counts the entries of the scratch /tmp while an instance lives."""


# --------------------------------------------------------------------------- frame codec
class FrameError(Exception):
    """The peer closed the pipe, sent an oversized frame, or missed the deadline."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason  # "eof", "too_large", "timeout"
        self.detail = detail


def write_frame(fd: int, payload: bytes) -> None:
    """Write one length-prefixed frame, looping over partial writes."""
    view = memoryview(HEADER.pack(len(payload)) + payload)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def wait_ready(fd: int, seconds: float, *, write: bool = False) -> bool:
    """True when ``fd`` becomes readable (or writable) within ``seconds``. Uses ``poll``, not
    ``select``, so a descriptor numbered above 1,023 is waited on like any other."""
    if seconds <= 0:
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT if write else select.POLLIN)
    return bool(poller.poll(max(1, int(seconds * 1000 + 0.999))))


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    chunks, remaining = [], n
    while remaining:
        if deadline is not None:
            if not wait_ready(fd, deadline - time.monotonic()):
                raise FrameError("timeout")
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            raise FrameError("eof")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int, max_bytes: int, deadline: float | None = None) -> bytes:
    """Read one frame; ``deadline`` is a ``time.monotonic()`` instant or None (wait forever)."""
    (size,) = HEADER.unpack(_read_exact(fd, HEADER.size, deadline))
    if size > max_bytes:
        raise FrameError("too_large", f"reply of {size} bytes exceeds the {max_bytes}-byte limit")
    return _read_exact(fd, size, deadline)


def send(fd: int, message: dict) -> None:
    """Encode ``message`` as JSON and write it as one frame."""
    write_frame(fd, json.dumps(message).encode())


def error(kind: str, detail: str, **extra) -> dict:
    """A failed reply: ``{"ok": False, "error": {"kind": ..., "detail": ..., ...}}``."""
    return {"ok": False, "error": {"kind": kind, "detail": detail, **extra}}


# --------------------------------------------------------------------------- seccomp
SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_CMP_NE, SCMP_CMP_MASKED_EQ = 1, 7
CLONE_NAMESPACE_FLAGS = (0x00000080, 0x00020000, 0x02000000, 0x04000000, 0x08000000,
                         0x10000000, 0x20000000, 0x40000000)
DENIED_SYSCALLS = (
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp",
    "mount", "umount2", "unshare", "setns", "pivot_root", "chroot",
    "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
    "open_by_handle_at", "name_to_handle_at",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "pidfd_open", "pidfd_send_signal", "pidfd_getfd",
    "swapon", "swapoff", "reboot", "acct", "quotactl", "syslog", "vhangup",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
    "sethostname", "setdomainname", "iopl", "ioperm", "personality",
    "process_madvise", "process_mrelease",
    # System V IPC and POSIX message queues: the IPC namespace is one per worker, so these
    # would carry state from one instance to the next (the zygote also removes any SysV
    # object left behind, for workers run without the filter)
    "ipc", "msgget", "msgsnd", "msgrcv", "msgctl", "shmget", "shmat", "shmdt", "shmctl",
    "semget", "semop", "semtimedop", "semctl",
    "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr",
)

SIGNAL_OWNER_FCNTL = (8, 10, 15)
"""``F_SETOWN``, ``F_SETSIG``, ``F_SETOWN_EX``: with ``O_ASYNC`` they make the kernel signal
any chosen process (the zygote included) when a descriptor becomes ready."""
SIGNAL_OWNER_IOCTL = (0x8901, 0x8902)
"""``FIOSETOWN`` and ``SIOCSPGRP``, the ``ioctl`` spellings of ``F_SETOWN``."""


def install_seccomp(protected_pid: int) -> str:
    """Load a deny-list seccomp filter (EPERM) via libseccomp; return a one-line summary.

    Besides the listed syscalls it refuses: ``clone`` with any namespace flag (``clone3``
    answers ENOSYS so libc falls back to ``clone``), sockets other than AF_UNIX, setting a
    descriptor's signal owner (``SIGNAL_OWNER_FCNTL``, ``SIGNAL_OWNER_IOCTL``), and any
    signal aimed at every process (``kill(-1)``) or at the zygote ``protected_pid``.
    libseccomp sets no-new-privileges before loading the filter.
    """
    import ctypes

    lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)

    class ArgCmp(ctypes.Structure):
        _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int),
                    ("datum_a", ctypes.c_uint64), ("datum_b", ctypes.c_uint64)]

    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int,
                                           ctypes.c_uint, ctypes.POINTER(ArgCmp)]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    eperm, enosys = 0x00050000 | 1, 0x00050000 | 38

    ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
    if not ctx:
        raise OSError("seccomp_init failed")
    rules = 0

    def rule(action: int, name: str, *conditions: tuple[int, int, int, int]) -> None:
        nonlocal rules
        number = lib.seccomp_syscall_resolve_name(name.encode())
        if number < 0:
            return  # not on this architecture / libseccomp version
        array = (ArgCmp * max(1, len(conditions)))(*[ArgCmp(*c) for c in conditions])
        rc = lib.seccomp_rule_add_array(ctx, action, number, len(conditions), array)
        if rc != 0:
            raise OSError(-rc, f"seccomp_rule_add({name}) failed")
        rules += 1

    _deny_rules(rule, protected_pid, eperm, enosys)
    rc = lib.seccomp_load(ctx)
    lib.seccomp_release(ctx)
    if rc != 0:
        raise OSError(-rc, "seccomp_load failed")
    return f"{rules} deny rules"


def _deny_rules(rule, protected_pid: int, eperm: int, enosys: int) -> None:
    """Add every rule of ``install_seccomp``'s filter through ``rule(action, name, *conditions)``."""
    for name in DENIED_SYSCALLS:
        rule(eperm, name)
    rule(enosys, "clone3")
    for flag in CLONE_NAMESPACE_FLAGS:
        rule(eperm, "clone", (0, SCMP_CMP_MASKED_EQ, flag, flag))
    rule(eperm, "socket", (0, SCMP_CMP_NE, 1, 0))  # only AF_UNIX
    mask = 0xFFFFFFFF
    for command in SIGNAL_OWNER_FCNTL:  # a descriptor's owner gets SIGIO/F_SETSIG signals
        rule(eperm, "fcntl", (1, SCMP_CMP_MASKED_EQ, mask, command))
    for request in SIGNAL_OWNER_IOCTL:
        rule(eperm, "ioctl", (1, SCMP_CMP_MASKED_EQ, mask, request))
    for target in sorted({-1, protected_pid, -protected_pid}):
        rule(eperm, "kill", (0, SCMP_CMP_MASKED_EQ, mask, target & mask))
    for name in ("tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo"):
        for target in sorted({-1, protected_pid}):
            rule(eperm, name, (0, SCMP_CMP_MASKED_EQ, mask, target & mask))


# --------------------------------------------------------------------------- limits
def set_limit(name: str, value: int) -> None:
    """Set soft and hard limit ``name`` (e.g. "RLIMIT_NOFILE") to ``value``."""
    import resource

    resource.setrlimit(getattr(resource, name), (value, value))


def status_field(field: str) -> str:
    """A field of /proc/self/status (e.g. "NoNewPrivs", "Seccomp"), or "" if absent."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return line.split(":", 1)[1].strip()
    return ""


# --------------------------------------------------------------------------- the child
class ForbiddenImport(ImportError):
    """Raised inside the environment program for a module outside the allowlist."""


class CappedText(io.TextIOBase):
    """A write-only text stream that keeps the first ``limit`` characters it is given."""

    def __init__(self, limit: int) -> None:
        self.limit, self.parts, self.size, self.dropped = limit, [], 0, 0

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        room = self.limit - self.size
        if room > 0:
            self.parts.append(text[:room])
            self.size += min(room, len(text))
        self.dropped += max(0, len(text) - max(room, 0))
        return len(text)

    def take(self) -> str:
        """Return and clear what was kept, with a marker if anything was dropped."""
        text = "".join(self.parts)
        if self.dropped:
            text += f"\n[... {self.dropped} characters of output dropped]"
        self.parts, self.size, self.dropped = [], 0, 0
        return text


def describe_exception(exc: BaseException, limit: int) -> dict:
    """Map an exception raised by the program to a structured failure."""
    if isinstance(exc, ForbiddenImport):
        return error("forbidden_import", str(exc))
    if isinstance(exc, SyntaxError):
        return error("syntax_error", f"{exc.msg} (line {exc.lineno})", line=exc.lineno)
    if isinstance(exc, MemoryError):  # free what the failed frames hold before formatting
        traceback.clear_frames(exc.__traceback__)
    text = "".join(traceback.format_exception(exc))[-limit:]
    if isinstance(exc, MemoryError):
        return error("memory_limit", "MemoryError raised in the environment", traceback=text)
    return error("exception", f"{type(exc).__name__}: {exc}"[:2000], traceback=text)


def make_env_builtins(settings: dict) -> dict:
    """The builtins the program sees: no open/input/breakpoint, imports through the allowlist."""
    allowed = frozenset(settings["allowed_modules"])
    enforce = settings["enforce_import_allowlist"]
    real_import = builtins.__import__

    def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
        if enforce and (level != 0 or name.partition(".")[0] not in allowed):
            raise ForbiddenImport(f"import of {name!r} is not allowed in environment code")
        return real_import(name, globals, locals, fromlist, level)

    env_builtins = dict(builtins.__dict__)
    env_builtins["__import__"] = guarded_import
    if enforce:
        for name in ("open", "input", "breakpoint", "help", "exit", "quit"):
            env_builtins.pop(name, None)
    return env_builtins


def find_env_class(namespace: dict, class_name: str | None):
    """The class named ``class_name``, else the single class defined here whose name ends in Env."""
    if class_name:
        found = namespace.get(class_name)
        if not isinstance(found, type):
            raise LookupError(f"no class named {class_name!r} in the program")
        return found
    candidates = [v for k, v in namespace.items() if isinstance(v, type) and k.endswith("Env")
                  and getattr(v, "__module__", None) == ENV_MODULE]
    if len(candidates) != 1:
        names = sorted(c.__name__ for c in candidates)
        raise LookupError(f"expected exactly one class whose name ends in 'Env', found {names}")
    return candidates[0]


def to_jsonable(value):
    """Tuples to lists, recursively enough for json; anything else is left to json.dumps."""
    return list(value) if isinstance(value, tuple) else value


def child_main(settings: dict, prelude: dict, channel: int) -> None:
    """Body of a forked instance: confine itself, wait for its ``load`` request on its channel
    to the host, build the environment, then serve calls until EOF. Forked ahead of time."""
    rfd = wfd = channel
    captured = _confine(settings)
    try:
        request = json.loads(read_frame(rfd, settings["max_request_bytes"]))
    except FrameError:
        return

    def reply(message: dict) -> None:
        message["output"] = captured.take()
        try:
            payload = json.dumps(message, default=_refuse, allow_nan=False).encode()
        except (TypeError, ValueError, RecursionError) as exc:
            payload = json.dumps(error("bad_return", f"result is not JSON-serialisable: {exc}"[:2000])
                                 | {"output": message["output"]}).encode()
        write_frame(wfd, payload)

    if request.get("op") != "load":
        reply(error("bad_call", "the first request to an instance must be 'load'"))
        return
    env = _load(request, prelude, settings, reply)
    if env is not None:
        _serve(env, rfd, settings, reply)


def _confine(settings: dict) -> CappedText:
    """New session, stdout/stderr to /dev/null then into a capped buffer (returned), memory and
    CPU limits of one instance."""
    os.setsid()
    null = os.open("/dev/null", os.O_RDWR)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)
    set_limit("RLIMIT_AS", settings["memory_mb"] << 20)
    set_limit("RLIMIT_CPU", settings["instance_cpu_s"])
    captured = CappedText(settings["max_output_chars"])
    sys.stdout = sys.stderr = captured
    return captured


def _load(request: dict, prelude: dict, settings: dict, reply) -> object | None:
    """Run the program on the prelude and instantiate its environment class; the reply says
    which class, or what failed (then ``None``)."""
    tb_limit = settings["max_traceback_chars"]
    namespace = dict(prelude)
    namespace.update(__name__=ENV_MODULE, __builtins__=make_env_builtins(settings))
    try:
        exec(compile(request["source"], "<environment>", "exec"), namespace)
    except BaseException as exc:  # noqa: BLE001 - everything the program raises is reported
        reply(describe_exception(exc, tb_limit))
        return None
    try:
        env_class = find_env_class(namespace, request.get("class_name"))
    except LookupError as exc:
        reply(error("bad_program", str(exc)))
        return None
    try:
        env = env_class()
    except BaseException as exc:  # noqa: BLE001
        reply(describe_exception(exc, tb_limit))
        return None
    reply({"ok": True, "value": env_class.__name__})
    return env


def _serve(env, rfd: int, settings: dict, reply) -> None:
    """Answer ``reset`` / ``step`` / ``call`` requests until the host closes the channel."""
    tb_limit = settings["max_traceback_chars"]
    while True:
        try:
            message = json.loads(read_frame(rfd, settings["max_request_bytes"]))
        except FrameError:
            return
        try:
            op = message["op"]
            if op == "reset":
                value = env.reset(seed=message.get("seed"))
            elif op == "step":
                value = env.step(message["action"])
            elif op == "call":
                method = message["method"]
                if method.startswith("_"):
                    reply(error("bad_call", f"method {method!r} is private"))
                    continue
                value = getattr(env, method)(*message.get("args", []))
            else:
                reply(error("bad_call", f"unknown op {op!r}"))
                continue
        except BaseException as exc:  # noqa: BLE001
            reply(describe_exception(exc, tb_limit))
            continue
        reply({"ok": True, "value": to_jsonable(value)})


def _refuse(value):
    raise TypeError(f"object of type {type(value).__name__} is not JSON serialisable")


# --------------------------------------------------------------------------- the zygote
class Zygote:
    """Forks each instance ahead of time, hands the host a direct channel to it, and cleans
    up after it.

    The host talks to an instance over its own socket pair and enforces the call deadlines;
    the zygote hears about the instance again only when the host closes it (normally, at a
    deadline, or after the channel died), and then kills it and every other process left.
    """

    def __init__(self, ctl: int, settings: dict, prelude: dict) -> None:
        self.ctl, self.settings, self.prelude = ctl, settings, prelude
        self.ctl_socket = socket.socket(fileno=os.dup(ctl))
        self.child_pid: int | None = None
        self.over_limit: str | None = None
        """Why the current instance was killed before the host closed it (the scratch limit)."""

    def serve(self) -> None:
        """Answer requests from the host until it closes the control socket."""
        self.offer_instance()
        while True:
            self.wait_for_host()
            try:
                message = json.loads(read_frame(self.ctl, self.settings["max_request_bytes"]))
            except FrameError:
                return
            op = message.get("op")
            if op == "close":
                send(self.ctl, {"ok": True, "value": self.end_instance(message.get("expect_dead", False))})
                self.offer_instance()
            elif op == "ping":
                send(self.ctl, {"ok": True, "value": "pong"})
            else:
                send(self.ctl, error("bad_call", f"unknown op {op!r}"))

    def wait_for_host(self) -> None:
        """Block until the host sends a control request. Under bubblewrap the scratch /tmp is
        this worker's alone: meanwhile its file count is checked every ``SCRATCH_CHECK_S`` and
        an instance past ``max_scratch_files`` is killed with everything it started (a tmpfs
        bounds bytes, not inodes, and every empty file pins kernel memory)."""
        police = self.settings["own_pid_namespace"]
        while not wait_ready(self.ctl, SCRATCH_CHECK_S if police else 3600.0):
            if police:
                self.check_scratch()

    def check_scratch(self) -> None:
        """Kill the instance (and every other process) when /tmp holds too many entries."""
        if self.child_pid is None or self.over_limit is not None:
            return
        used, limit = scratch_entries("/tmp"), self.settings["max_scratch_files"]
        if used <= limit:
            return
        self.over_limit = (f"the scratch /tmp held {used:,} files and directories, more than "
                           f"max_scratch_files ({limit:,}); instance killed")
        kill_strays(True, self.child_pid)
        clear_scratch("/tmp")

    def offer_instance(self) -> None:
        """Fork the next instance and send the host its end of the instance's socket pair."""
        host_end, child_end = socket.socketpair()
        pid = os.fork()
        if pid == 0:
            self.ctl_socket.close()
            os.close(self.ctl)
            host_end.close()
            code = 0
            try:
                child_main(self.settings, self.prelude, child_end.detach())
            except BaseException:  # noqa: BLE001 - the child must never return into the zygote
                code = 70
            os._exit(code)
        child_end.close()
        payload = json.dumps({"op": "instance", "pid": pid}).encode()
        socket.send_fds(self.ctl_socket, [HEADER.pack(len(payload)) + payload], [host_end.fileno()])
        host_end.close()
        self.child_pid = pid

    def end_instance(self, expect_dead: bool) -> dict:
        """Kill the instance and every other process in the sandbox.

        Returns how the instance had ended before that (``died``, ``signal``, ``exit_code``)
        and how many processes were killed. ``expect_dead`` (the host saw the channel close)
        gives a dying instance a moment to finish exiting so its signal can be reported.
        """
        outcome: dict = {"died": False, "killed": 0}
        pid, self.child_pid = self.child_pid, None
        status = None if self.over_limit else _wait_briefly(pid, 0.5 if expect_dead else 0.0)
        if self.over_limit:  # killed and reaped already
            outcome.update(died=True, limit=self.over_limit)
            self.over_limit = None
        elif status is None:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            outcome["killed"] += 1
        elif os.WIFSIGNALED(status):
            outcome.update(died=True, signal=os.WTERMSIG(status))
        else:
            outcome.update(died=True, exit_code=os.WEXITSTATUS(status))
        outcome["killed"] += kill_strays(self.settings["own_pid_namespace"], pid)
        if self.settings["own_pid_namespace"]:  # the scratch tmpfs is ours alone only under bwrap
            clear_scratch("/tmp")
            removed = clear_mqueue()  # open(2) on /dev/mqueue makes a queue, filter or not
            if not self.settings["seccomp"]:  # with the filter no instance can make any
                removed += clear_sysv_ipc()
            if removed:
                outcome["ipc_removed"] = removed
        return outcome


SYSV_IPC_RMID = 0
SYSV_TABLES = (("msg", "msgctl"), ("shm", "shmctl"), ("sem", "semctl"))


def clear_mqueue(mqueue: str = "/dev/mqueue") -> int:
    """Remove every POSIX message queue of this IPC namespace (bwrap gives each worker its own
    and mounts its mqueue file system at ``mqueue``); returns how many."""
    try:
        queues = os.listdir(mqueue)
    except OSError:
        return 0
    removed = 0
    for name in queues:
        try:
            os.unlink(os.path.join(mqueue, name))
            removed += 1
        except OSError:
            pass
    return removed


def clear_sysv_ipc(root: str = "/proc/sysvipc") -> int:
    """Remove every System V message queue, shared-memory segment and semaphore set in this
    IPC namespace (bwrap gives each worker its own), so none outlives the instance that made
    it. Returns how many were removed."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    removed = 0
    for table, control in SYSV_TABLES:
        try:
            with open(f"{root}/{table}") as handle:
                rows = handle.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) < 2 or not fields[1].lstrip("-").isdigit():
                continue
            ident = int(fields[1])
            if table == "sem":
                result = libc.semctl(ident, 0, SYSV_IPC_RMID)
            else:
                result = getattr(libc, control)(ident, SYSV_IPC_RMID, None)
            removed += result == 0
    return removed


def clear_scratch(root: str) -> None:
    """Empty the scratch directory so nothing passes from one instance to the next, even
    entries the instance made unreadable or unwritable (same uid: we can chmod them back).

    Iterative, and by relative names from the directory being emptied (the process walks down
    with ``chdir``), so neither nesting deeper than the interpreter's recursion limit nor paths
    longer than ``PATH_MAX`` stop it. Links are removed, never followed. Ends back in ``root``.
    """
    os.chdir(root)
    depth, emptied = 0, set()
    while True:
        os.chmod(".", 0o700)
        child = _empty_level(emptied)
        if child is not None:
            os.chdir(child)
            depth += 1
            continue
        if depth == 0:
            return
        here = os.stat(".")
        emptied.add((here.st_dev, here.st_ino))
        os.chdir("..")
        depth -= 1


def _empty_level(emptied: set) -> str | None:
    """Remove what the current directory holds; return a subdirectory still to be emptied."""
    import stat

    for name in os.listdir("."):
        info = os.lstat(name)
        if not stat.S_ISDIR(info.st_mode):
            os.unlink(name)
            continue
        try:
            os.rmdir(name)
        except OSError:
            if (info.st_dev, info.st_ino) in emptied:
                continue  # emptied already and still not removable: leave it
            os.chmod(name, 0o700)
            return name
    return None


def scratch_entries(root: str) -> int:
    """Files, directories and links the file system at ``root`` holds (its used inodes)."""
    info = os.statvfs(root)
    return info.f_files - info.f_ffree


def _wait_briefly(pid: int, seconds: float) -> int | None:
    """The exit status of child ``pid`` if it exits within ``seconds``, else None."""
    deadline = time.monotonic() + seconds
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.002)


def list_live_pids() -> list[int]:
    """Live (non-zombie) processes visible in /proc other than pid 1 and this one."""
    me, pids = os.getpid(), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in (1, me):
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in (b"Z", b"X"):
            pids.append(int(entry))
    return pids


def kill_strays(own_pid_namespace: bool, child_pid: int) -> int:
    """SIGKILL every other process left in the sandbox and reap our zombies.

    In its own pid namespace (bubblewrap) the zygote sees only sandbox processes, so it kills
    all of them: double-forked daemons cannot hide. Without one (degraded mode) it can only
    kill the instance's session.
    """
    killed = 0
    for attempt in range(1000):
        if attempt:
            time.sleep(0.0005)
        if own_pid_namespace:
            pids = list_live_pids()
        else:
            pids = [-child_pid] if _session_alive(child_pid) else []
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except (ProcessLookupError, PermissionError):
                pass
        _reap()
    _reap()
    return killed


def _session_alive(sid: int) -> bool:
    try:
        os.killpg(sid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _reap() -> None:
    """Collect exited children."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def harden(settings: dict) -> dict:
    """Apply the zygote-wide layers and return a report of each one."""
    import ctypes

    report = {"uid": os.getuid(), "gid": os.getgid(), "pid": os.getpid()}
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: /proc/<zygote> stays private
    limits = {"RLIMIT_CORE": 0, "RLIMIT_FSIZE": settings["max_file_mb"] << 20,
              "RLIMIT_NOFILE": settings["max_open_files"], "RLIMIT_NPROC": settings["max_processes"]}
    for name, value in limits.items():
        set_limit(name, value)
    report["rlimits"] = limits | {"RLIMIT_AS": settings["memory_mb"] << 20,
                                  "RLIMIT_CPU": settings["instance_cpu_s"]}
    if settings["seccomp"]:
        report["seccomp"] = install_seccomp(os.getpid())
    report["no_new_privs"] = status_field("NoNewPrivs") == "1"
    report["seccomp_mode"] = status_field("Seccomp")
    return report


def preload(settings: dict) -> tuple[list[str], dict]:
    """Import the allowed modules now (children inherit them) and run the trusted prelude."""
    loaded = []
    for name in settings["allowed_modules"]:
        try:
            __import__(name)
            loaded.append(name)
        except ImportError:
            pass
    prelude: dict = {"__name__": "__prelude__", "__builtins__": builtins}
    if settings["prelude_source"]:
        exec(compile(settings["prelude_source"], "<prelude>", "exec"), prelude)
    prelude.pop("__builtins__")
    prelude.pop("__name__")
    return loaded, prelude


def close_inherited(keep: set[int]) -> None:
    """Close every descriptor but 0, 1, 2 and ``keep`` (the host's runtime directories came in
    open for the launcher: kept under bubblewrap, an instance could walk from them out of the
    sandbox; without it, in degraded mode, the interpreter still reads its library through them)."""
    import resource

    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    limit = 1 << 16 if limit == resource.RLIM_INFINITY or limit > 1 << 16 else limit
    start = 3
    for fd in sorted(keep | {limit}):
        os.closerange(start, fd)
        start = fd + 1


def main() -> None:
    ctl = int(sys.argv[1])
    settings = json.loads(read_frame(ctl, 1 << 24))["settings"]
    close_inherited({ctl, *settings["keep_fds"]})
    try:
        loaded, prelude = preload(settings)
        report = harden(settings)
    except BaseException as exc:  # noqa: BLE001 - report start-up failures to the host
        send(ctl, error("sandbox_unavailable", f"worker start-up failed: {exc!r}"))
        return
    report["preloaded"] = loaded
    gc.collect()
    gc.freeze()  # forked instances then leave the zygote's objects untouched (fewer page copies)
    send(ctl, {"ok": True, "value": report})
    Zygote(ctl, settings, prelude).serve()


if __name__ == "__main__":
    main()
