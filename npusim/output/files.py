"""Files a command writes (traces, figures, tables, profiles): checked before the long part, and written
whole or not at all.

`check_writable` refuses, in one line naming the option, a path whose folder is missing, that is a folder or
a device rather than a file, or where a file cannot be created (tried for real: a read-only folder or file
system says so here, not after the work). `write_bytes` / `write_text` write a temporary file beside the
target and move it into place, so that a full disk, a quota or an interrupt leaves the old file (or none),
never a truncated or empty one; a path that is a link is followed, and its target replaced.
"""
from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from npusim.errors import NpuSimError


class OutputError(NpuSimError):
    """A file that cannot be written: one line naming the option, the path and why."""


def _target(path: Path) -> Path:
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def check_writable(option: str, path: str | Path) -> None:
    """OutputError unless `path` can be written as a regular file (see the module doc)."""
    path = Path(path)
    target = _target(path)
    where = f"{option} {path}"
    if target.is_dir():
        raise OutputError(f"{where}: a directory, not a file")
    if not target.parent.is_dir():
        raise OutputError(f"{where}: no directory {target.parent}")
    if target.exists() and not stat.S_ISREG(target.stat().st_mode):
        raise OutputError(f"{where}: not a regular file (a device or a pipe)")
    if target.exists() and not os.access(target, os.W_OK):
        raise OutputError(f"{where}: cannot write there (the file is read-only)")
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as err:
        raise OutputError(f"{where}: cannot write there ({err.strerror or err})") from None
    os.close(fd)
    os.unlink(probe)


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether two paths name one file (links followed; neither need exist)."""
    return os.path.realpath(a) == os.path.realpath(b)


def write_bytes(option: str, path: str | Path, data: bytes) -> Path:
    """Write `data` to `path` whole or not at all; OutputError naming `option` otherwise. Returns the path."""
    path = Path(path)
    target = _target(path)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if target.exists():
            os.chmod(tmp, stat.S_IMODE(target.stat().st_mode))
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
        tmp = None
    except OSError as err:
        raise OutputError(f"{option} {path}: cannot write it ({err.strerror or err}); nothing was written") from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    return path


def write_text(option: str, path: str | Path, text: str) -> Path:
    return write_bytes(option, path, text.encode("utf-8"))
