"""Where the engines' own output goes while a run goes: the run dir's ``engine.log``.

vLLM, TRL, transformers, datasets and torch report through Python's ``logging`` and ``warnings``,
and a few write to ``sys.stderr`` directly: start-up banners, memory plans, deprecation notes,
progress bars. A run (``engine_log``) keeps all of it in ``RUN/engine.log``, so that the terminal
shows the run's own progress lines and tables:

* the root logger takes every record at INFO and above into ``engine.log``. A library that
  installed a terminal handler of its own (transformers, datasets, optuna, vLLM after an engine
  started) has it taken off for the run and passes its records up instead. vLLM is told not to
  install one (``VLLM_CONFIGURE_LOGGING=0``, set before a run builds its plugins, so before any
  engine starts): its loggers pass their records up too, in this process and in forked engine
  processes, which inherit the handlers;
* Python warnings (``FutureWarning``, torch's ``UserWarning``...) are logged as ``py.warnings``
  records instead of printed;
* stderr goes to ``engine.log``: ``sys.stderr`` (progress bars; a handler a library installs
  during the run writes there too, and to the terminal again once the run has ended) and the
  descriptor itself, which native code (torch's and vLLM's C++ warnings) and engine processes
  write to, spawned ones included (they start without handlers: Python prints their warnings to
  stderr). A crash's own report (a native fault's traceback) is therefore in ``engine.log``.

The terminal still shows what a user can act on: warnings of this project's own packages and
errors of any. ``verbose`` shows every record on the terminal as well and leaves stderr alone.
Everything is put back when the run ends, so that a process that runs several runs (``compare``)
gives each its own log.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from curriculum.core.safefs import is_plain_dir, is_plain_file, open_inside

LOG_NAME = "engine.log"
OWN_PACKAGES = frozenset({"curriculum", "engineers", "testbeds", "trainers"})
"""Top-level packages whose warnings a user can act on: shown on the terminal in a quiet run."""

_FILE_FORMAT = "%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"
_TERMINAL_FORMAT = "%(levelname)s %(name)s: %(message)s"


class _ToTerminal(logging.Filter):
    """Which records a run also shows on the terminal: all (``verbose``), else errors and the
    warnings of this project's own packages."""

    def __init__(self, verbose: bool) -> None:
        super().__init__()
        self.verbose = verbose

    def filter(self, record: logging.LogRecord) -> bool:
        if self.verbose or record.levelno >= logging.ERROR:
            return True
        return record.levelno >= logging.WARNING and record.name.split(".")[0] in OWN_PACKAGES


class _Stderr(io.TextIOBase):
    """``sys.stderr`` during a quiet run: text goes to the engine log while the run goes, to the
    stderr it replaced once the run has ended (a handler made meanwhile may keep this stream)."""

    encoding = "utf-8"

    def __init__(self, log: TextIO, original: TextIO) -> None:
        super().__init__()
        self.log, self.original, self.active = log, original, True

    def write(self, text: str) -> int:
        (self.log if self.active else self.original).write(text)
        return len(text)

    def flush(self) -> None:
        (self.log if self.active else self.original).flush()

    def fileno(self) -> int:  # descriptor 2 where it was: the log while the run goes
        return self.original.fileno()

    def isatty(self) -> bool:
        return False

    def writable(self) -> bool:
        return True


def engine_environment() -> dict[str, str | None]:
    """Set the environment the engines read when they start (each variable only when unset, and
    none when the user gave vLLM a logging config of their own); returns the previous values."""
    before: dict[str, str | None] = {}
    if "VLLM_LOGGING_CONFIG_PATH" not in os.environ and "VLLM_CONFIGURE_LOGGING" not in os.environ:
        before["VLLM_CONFIGURE_LOGGING"] = None
        os.environ["VLLM_CONFIGURE_LOGGING"] = "0"  # vLLM's loggers then pass records to the root
    return before


def open_log(run_dir: Path) -> TextIO:
    """``RUN/engine.log`` for appending, reached without following a link (a link or a device in
    its place is replaced by a new file; a directory there is refused as any run-dir path is)."""
    path = run_dir / LOG_NAME
    if os.path.lexists(path) and not is_plain_file(path) and not is_plain_dir(path):
        os.unlink(path)
    fd = open_inside(run_dir, LOG_NAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    return os.fdopen(fd, "a", buffering=1, encoding="utf-8", errors="backslashreplace")


def _detach_terminal_handlers() -> list[tuple[logging.Logger, list[logging.Handler], bool]]:
    """Take the terminal handlers off every library logger that has one, and make it pass its
    records up; returns what was changed, to put back."""
    changed = []
    for name, logger in list(logging.root.manager.loggerDict.items()):
        if not isinstance(logger, logging.Logger) or name.split(".")[0] in OWN_PACKAGES:
            continue
        terminal = [h for h in logger.handlers
                    if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler)]
        if terminal:
            changed.append((logger, terminal, logger.propagate))
            for handler in terminal:
                logger.removeHandler(handler)
            logger.propagate = True
    return changed


def _handler(stream: TextIO, fmt: str, *, verbose: bool | None = None) -> logging.Handler:
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter(fmt))
    if verbose is not None:
        handler.addFilter(_ToTerminal(verbose))
    return handler


def _log_warning(message: Any, category: type[Warning], filename: str, lineno: int,
                 file: TextIO | None = None, line: str | None = None) -> None:
    """``warnings.showwarning`` during a run: a ``py.warnings`` record."""
    text = warnings.formatwarning(message, category, filename, lineno, line).rstrip()
    logging.getLogger("py.warnings").warning("%s", text)


@contextlib.contextmanager
def engine_log(run_dir: Path, *, verbose: bool = False) -> Iterator[Path]:
    """For the duration of a run, route the engines' logs, warnings and stderr to
    ``run_dir/engine.log`` (module docstring); ``verbose`` also shows them on the terminal.
    Yields the log's path."""
    environment = engine_environment()
    log = open_log(run_dir)
    try:
        with contextlib.nullcontext(sys.stderr) if verbose else _diverted_stderr(log) as terminal:
            with _logging_to(log, terminal, verbose):
                yield run_dir / LOG_NAME
    finally:
        log.close()
        for name, value in environment.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _descriptor(stream: Any) -> int | None:
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both of the last two
        return None


@contextlib.contextmanager
def _diverted_stderr(log: TextIO) -> Iterator[TextIO]:
    """Send stderr to ``log``: ``sys.stderr`` and descriptor 2, which C++ code (torch's and vLLM's
    native warnings) and engine processes started meanwhile, forked or spawned, write to. Yields a
    stream to the terminal's stderr as it was."""
    original = sys.stderr
    original.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no descriptor 2 (a closed stderr): only Python's stderr is diverted
        saved = None
    terminal = original
    if saved is not None and _descriptor(original) == 2:  # the terminal is descriptor 2 itself
        terminal = os.fdopen(os.dup(saved), "w", buffering=1, encoding="utf-8", errors="backslashreplace")
    proxy = _Stderr(log, original)
    if saved is not None:
        os.dup2(log.fileno(), 2)
    try:
        with contextlib.redirect_stderr(proxy):
            yield terminal
    finally:
        proxy.active = False
        log.flush()
        if saved is not None:
            os.dup2(saved, 2)
            os.close(saved)
        if terminal is not original:
            terminal.close()


@contextlib.contextmanager
def _logging_to(log: TextIO, terminal: TextIO, verbose: bool) -> Iterator[None]:
    """Every record at INFO and above to ``log``, the ones ``_ToTerminal`` lets through to
    ``terminal``, library terminal handlers lent to the root and warnings logged; all put back
    after."""
    root = logging.getLogger()
    handlers = [_handler(log, _FILE_FORMAT), _handler(terminal, _TERMINAL_FORMAT, verbose=verbose)]
    level, show_warning = root.level, warnings.showwarning
    detached = _detach_terminal_handlers()
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(min(level or logging.WARNING, logging.INFO))
    warnings.showwarning = _log_warning
    try:
        yield
    finally:
        warnings.showwarning = show_warning
        root.setLevel(level)
        for handler in handlers:
            root.removeHandler(handler)
            handler.close()
        for logger, removed, propagate in detached:
            for handler in removed:
                logger.addHandler(handler)
            logger.propagate = propagate
