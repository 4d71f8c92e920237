"""Writing a run's files so that a failed write (a full disk, an I/O error, a read-only mount)
leaves no half-written file and ends the run with one message naming the path and the errno.

    with atomic_file(path) as f:   # f writes path + ".tmp"; fsynced, then renamed over path
        f.write(data)              # any OSError: the .tmp is removed, WriteFailed is raised

A reader (resume=, srl eval) so sees the old file whole or the new one whole, never a torn one.
"""

from __future__ import annotations

import errno as errno_codes
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

TMP_SUFFIX = ".tmp"


class WriteFailed(OSError):
    """A run's file could not be written; str() names the path and the errno (ENOSPC, EIO...)."""

    @classmethod
    def of(cls, path: Path | str, error: OSError) -> WriteFailed:
        if isinstance(error, WriteFailed):
            return error
        return cls(error.errno, error.strerror or str(error), str(path))

    def __str__(self) -> str:
        name = errno_codes.errorcode.get(self.errno, "") if self.errno is not None else ""
        code = f"{name}, errno {self.errno}: " if name else ""
        return f"cannot write {self.filename}: {code}{self.strerror}"


@contextmanager
def failing_as(path: Path | str) -> Iterator[None]:
    """Turn an OSError raised inside into WriteFailed naming `path`."""
    try:
        yield
    except OSError as e:
        raise WriteFailed.of(path, e) from e


def tmp_path(path: Path) -> Path:
    return path.with_name(path.name + TMP_SUFFIX)


class _Tracked:
    """A file that remembers the OSError of a failed write: torch.save reports one as a
    RuntimeError with no errno ("unexpected pos ..."), and the errno is what names the fault."""

    def __init__(self, file: BinaryIO) -> None:
        self.file = file
        self.error: OSError | None = None

    def write(self, data: bytes) -> int:
        try:
            return self.file.write(data)
        except OSError as e:
            self.error = self.error or e
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self.file, name)


@contextmanager
def atomic_file(path: Path | str) -> Iterator[BinaryIO]:
    """A binary file that replaces `path` once the block ends without error (tmp + fsync + rename);
    on any error the tmp file is removed, and an OSError (one a writer wrapped in another
    exception too) becomes WriteFailed."""
    path = Path(path)
    tmp = tmp_path(path)
    try:
        with failing_as(path), open(tmp, "wb") as f:
            tracked = _Tracked(f)
            try:
                yield tracked  # type: ignore[misc]
            except Exception as e:
                if tracked.error is not None and not isinstance(e, OSError):
                    raise WriteFailed.of(path, tracked.error) from e
                raise
            f.flush()
            os.fsync(f.fileno())  # the data is on disk before the name points at it
        with failing_as(path):
            os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass  # an unreadable directory: nothing more to clean
        raise


def write_text_atomic(path: Path | str, text: str) -> None:
    with atomic_file(path) as f:
        f.write(text.encode())
