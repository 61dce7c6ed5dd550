"""Local-filesystem steps the file-writing connectors share (FileSink, ParquetSink on local paths)."""

from __future__ import annotations

import os


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """Make a directory's entries (a rename, a link, a new file) durable; a no-op where it cannot be opened."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on a directory
    finally:
        os.close(fd)


__all__ = ["fsync_dir"]
