"""Every file this package writes goes through write_file(): the contents go to a temporary
file beside the target, are flushed, synced and closed (each step checked), and only then
renamed onto the target. A failure anywhere (a full disk, a vanished directory, a target that is
a directory) removes the temporary file, leaves the target as it was and raises WriteError,
whose message is one line: `cannot write 'PATH': REASON` (the command line prints it and exits
1).

A target that exists and is neither a regular file nor a directory (a FIFO, a terminal,
/dev/null or /dev/stdout) cannot be replaced by a rename without replacing the device itself:
it is written in place, as a stream.
"""
from __future__ import annotations

import os
import stat
import tempfile
from typing import IO, Callable, Optional

#: Writes the whole contents into the open file it is given.
Fill = Callable[[IO], None]


class WriteError(Exception):
    """A file could not be written; the target is as it was. The message is one line."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"cannot write '{path}': {reason}")
        self.path = path
        self.reason = reason


def reason(e: BaseException) -> str:
    """Why an operation failed, on one line and without the temporary file's name."""
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    return " ".join(str(e).split()) or type(e).__name__


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _stream_target(path: str) -> bool:
    """Whether `path` is an existing FIFO, device or socket (written in place, not replaced)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _sync(f: IO) -> None:
    f.flush()
    try:
        os.fsync(f.fileno())
    except OSError as e:
        # Pipes and terminals cannot be synced; a regular file that fails to sync failed.
        if not _stream_target(f.name if isinstance(f.name, str) else ""):
            raise e


def _open(fd_or_path, binary: bool) -> IO:
    if binary:
        return open(fd_or_path, "wb")
    # newline="": what the writer writes ("\n", or the CSV writer's own) is what the file holds.
    return open(fd_or_path, "w", encoding="utf-8", newline="")


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _write_stream(path: str, fill: Fill, binary: bool) -> str:
    try:
        with _open(path, binary) as f:
            fill(f)
            _sync(f)
    except OSError as e:
        raise WriteError(path, reason(e)) from e
    return path


def write_file(path: str, fill: Fill, binary: bool = False) -> str:
    """Writes `path` through `fill` (given the open temporary file: text in UTF-8, or bytes
    with `binary`) and returns `path`. A symbolic link is followed: the file it names is
    replaced and the link kept. Raises WriteError (the target untouched, no temporary file
    left) if any step fails; an exception of `fill` that is not an OSError (e.g. a missing
    package) removes the temporary file and propagates as it is."""
    if _stream_target(path):
        return _write_stream(path, fill, binary)
    target = os.path.realpath(path)
    directory = os.path.dirname(target)
    try:
        handle, temporary = tempfile.mkstemp(dir=directory,
                                             prefix=f".{os.path.basename(target)}.",
                                             suffix=".tmp")
    except OSError as e:
        raise WriteError(path, reason(e)) from e
    failure: Optional[BaseException] = None
    try:
        with _open(handle, binary) as f:
            fill(f)
            _sync(f)
        # mkstemp makes the file private; what is written is an ordinary file.
        os.chmod(temporary, 0o666 & ~_umask())
        os.replace(temporary, target)
    except BaseException as e:
        failure = e
        _remove(temporary)
    if isinstance(failure, OSError):
        raise WriteError(path, reason(failure)) from failure
    if failure is not None:
        raise failure
    return path


def write_text(path: str, text: str) -> str:
    """`text` written to `path` as write_file() writes (UTF-8)."""
    return write_file(path, lambda f: f.write(text))


def make_directory(path: str) -> str:
    """os.makedirs(path, exist_ok=True), a failure as WriteError."""
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise WriteError(path, reason(e)) from e
    return path
