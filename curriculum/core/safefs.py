"""Opening files that may not be what they claim: bounded reads and no links inside a directory.

Two rules, one function each, so every caller gets the same refusals:

* ``read_bounded(path, what, limit)`` — a file a user names (a config, a program, a JSONL
  input, a design file): it must be a regular file (not a device such as ``/dev/zero``, a
  pipe, a socket or a directory) of at most ``limit`` bytes. Links the user typed are followed;
  what they point at is held to the same rule. Anything else is a ``ConfigError`` of one line
  naming the path and the reason, raised before more than ``limit + 1`` bytes are read.
* ``open_inside(root, relative, flags)`` — a path inside a directory we own (a run directory):
  every component below ``root`` is opened relative to its parent with ``O_NOFOLLOW``, so a
  symbolic link anywhere below ``root`` is refused (``UnsafePath``) instead of followed out of
  it, and ``relative`` may not be absolute or climb with ``..``. ``read_inside`` adds the
  regular-file and size rules; ``check_relative`` is the name rule alone (for paths a file
  such as a manifest lists). ``root`` itself is opened as given: the user chose it.

Opens use ``O_NONBLOCK`` where a read is meant, so a FIFO planted in a path never blocks.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path, PurePosixPath

from curriculum.core.config import ConfigError

MAX_USER_FILE_BYTES = 256 << 20
"""Default cap of ``read_bounded``: larger than any input the command line takes."""


class UnsafePath(ConfigError):
    """A path that leaves its directory, goes through a link, or is not a regular file."""

    def __init__(self, message: str, missing: bool = False) -> None:
        super().__init__(message)
        self.missing = missing
        """The path (or a directory on it) does not exist."""


def file_kind(mode: int) -> str:
    """What a file of ``st_mode`` ``mode`` is, in words (for refusals)."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISFIFO(mode):
        return "a pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def os_problem(path: str | Path, exc: OSError) -> str:
    """A failed open or read of ``path``, in one line."""
    if isinstance(exc, FileNotFoundError):
        return f"{path}: no such file"
    if isinstance(exc, IsADirectoryError):
        return f"{path}: is a directory, not a file"
    if isinstance(exc, PermissionError):
        return f"{path}: permission denied"
    if exc.errno == errno.ELOOP:
        return f"{path}: is a symbolic link (not followed here)"
    return f"{path}: cannot be read ({exc.strerror or exc})"


def read_fd_bounded(fd: int, name: str | Path, limit: int, what: str = "file") -> bytes:
    """Read all of open descriptor ``fd`` (a regular file, at most ``limit`` bytes; closed after)."""
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafePath(f"{what} {name} is {file_kind(info.st_mode)}, not a regular file")
        if info.st_size > limit:
            raise UnsafePath(f"{what} {name} is {info.st_size:,} bytes, over the {limit:,}-byte "
                             "limit; it is not read")
        chunks, total = [], 0
        while chunk := os.read(fd, min(1 << 20, limit + 1 - total)):
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:  # grew while read
                raise UnsafePath(f"{what} {name} is over the {limit:,}-byte limit; it is not read")
        return b"".join(chunks)
    except OSError as exc:
        raise UnsafePath(os_problem(name, exc)) from None
    finally:
        os.close(fd)


def read_bounded(path: str | Path, what: str = "file", limit: int = MAX_USER_FILE_BYTES) -> bytes:
    """The bytes of a file a user named (see the module docstring)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise ConfigError(os_problem(path, exc)) from None
    return read_fd_bounded(fd, path, limit, what)


def check_relative(relative: str) -> PurePosixPath:
    """``relative`` as a path that stays inside its directory; ``UnsafePath`` otherwise."""
    path = PurePosixPath(relative)
    if (not relative or "\x00" in relative or path.is_absolute()
            or any(part in ("..", ".") for part in relative.split("/"))):
        raise UnsafePath(f"{relative!r} is not a plain relative path inside its directory")
    return path


def open_inside(root: str | Path, relative: str, flags: int = os.O_RDONLY, mode: int = 0o644) -> int:
    """A descriptor for ``root/relative`` reached without following any link below ``root``."""
    parts = check_relative(relative).parts
    where = Path(root) / relative
    try:
        directory = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise UnsafePath(os_problem(root, exc)) from None
    try:
        for part in parts[:-1]:
            inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                            dir_fd=directory)
            os.close(directory)
            directory = inner
        return os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=directory)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _has_link(root, parts):
            raise UnsafePath(f"{where}: goes through a symbolic link (not followed inside "
                             f"{root})") from None
        raise UnsafePath(os_problem(where, exc),
                         missing=isinstance(exc, FileNotFoundError)) from None
    finally:
        os.close(directory)


def _has_link(root: str | Path, parts: tuple[str, ...]) -> bool:
    path = Path(root)
    for part in parts:
        path = path / part
        if path.is_symlink():
            return True
    return False


def read_inside(root: str | Path, relative: str, limit: int, what: str = "file") -> bytes:
    """The bytes of regular file ``root/relative`` (no links below ``root``; at most ``limit``)."""
    fd = open_inside(root, relative, os.O_RDONLY | os.O_NONBLOCK)
    return read_fd_bounded(fd, Path(root) / relative, limit, what)


def is_plain_dir(path: str | Path) -> bool:
    """``path`` is a directory and not a symbolic link to one."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def is_plain_file(path: str | Path) -> bool:
    """``path`` is a regular file and not a symbolic link to one."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False
