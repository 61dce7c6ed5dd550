"""Which of a run's paths another machine cannot see, and whether that is allowed (pure; no Airflow here).

A connector run by a distributed executor (Airflow's Celery, Kubernetes or Edge workers) may have each attempt, and
each task of a fan-out, on a different machine. Three kinds of local path then break the promise:

- **the embedded store** (``sqlite:///path``): offsets, ranges and generations on one worker's disk; another worker
  opens a store of its own and starts from nothing (every record again). SQLite's own documentation says its
  locking is unreliable on network filesystems and that WAL mode (the store's) needs shared memory on one host, so
  this is refused on a shared filesystem too: use the Kafka backend;
- **a destination that fences with ``flock``** (FileSink's directory: its manifest and lock): refused unless the
  filesystem carries ``flock`` between hosts (:data:`FLOCK_ACROSS_HOSTS`);
- **any other local path a connector reads or writes** (a DirectorySource folder, a ParquetSink ``path`` without a
  scheme, a SQL connector's SQLite file): refused unless on a shared filesystem (:data:`SHARED_FILESYSTEMS`).

"Shared" is the filesystem type of the mount holding the path (the longest mount point above it in
``/proc/self/mountinfo``, the path resolved through symlinks, its nearest existing ancestor when it does not exist
yet). A local type (ext4, xfs, btrfs, tmpfs, overlay, ...) is this machine's alone.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "FLOCK_ACROSS_HOSTS", "SHARED_FILESYSTEMS", "LocalPath", "Mount", "local_paths", "mount_of", "parse_mountinfo",
    "problems", "read_mounts",
]

SHARED_FILESYSTEMS = frozenset({
    "nfs", "nfs4", "cifs", "smb3", "ceph", "glusterfs", "fuse.glusterfs", "lustre", "gpfs", "beegfs", "fuse.cephfs",
    "ocfs2", "gfs2", "afs", "fuse.sshfs", "9p", "virtiofs", "fuse.juicefs", "fuse.s3fs", "fuse.gcsfuse",
    "fuse.mountpoint-s3", "efs",
})
"""Filesystem types other machines can mount too (``/proc/self/mountinfo``'s type; ``efs`` is NFS 4.1)."""

FLOCK_ACROSS_HOSTS = frozenset({"nfs", "nfs4", "ceph", "gpfs", "ocfs2", "gfs2", "lustre", "efs"})
"""Types on which Linux's ``flock`` excludes holders on other hosts: NFS (the kernel emulates ``flock`` with
byte-range locks, lockd for v3, the protocol's own for v4; not with ``nolock`` or ``local_lock=flock|all``),
CephFS (the MDS arbitrates), GPFS, OCFS2 and GFS2 (cluster lock managers), Lustre only when mounted with
``-o flock`` (``localflock`` locks one client only). CIFS/SMB, GlusterFS, FUSE filesystems, 9p and virtiofs
are shared but their ``flock`` is local to each client or unspecified: refused."""


@dataclass(frozen=True)
class Mount:
    """One line of ``/proc/self/mountinfo``: where, what type, from where, with which options."""

    mount_point: str
    fstype: str
    source: str = ""
    options: frozenset[str] = field(default_factory=frozenset)

    @property
    def shared(self) -> bool:
        return self.fstype in SHARED_FILESYSTEMS

    @property
    def flock_across_hosts(self) -> bool:
        if self.fstype not in FLOCK_ACROSS_HOSTS:
            return False
        if self.fstype == "lustre":
            return "flock" in self.options
        return not ({"nolock", "local_lock=flock", "local_lock=all"} & self.options)

    def describe(self) -> str:
        return f"{self.fstype} at {self.mount_point}" + (f" from {self.source}" if self.source else "")


def _unescape(field_: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal (``\\040``)."""
    out, i = [], 0
    while i < len(field_):
        if field_[i] == "\\" and i + 4 <= len(field_) and field_[i + 1:i + 4].isdigit():
            out.append(chr(int(field_[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field_[i])
            i += 1
    return "".join(out)


def parse_mountinfo(text: str) -> list[Mount]:
    """The mounts of ``/proc/<pid>/mountinfo`` text (``proc(5)``: ``id parent major:minor root mount-point
    options [optional...] - type source super-options``)."""
    mounts = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields, tail = left.split(), right.split()
        if len(fields) < 6 or not tail:
            continue
        options = set(fields[5].split(","))
        if len(tail) > 2:
            options.update(tail[2].split(","))
        mounts.append(Mount(_unescape(fields[4]), tail[0], _unescape(tail[1]) if len(tail) > 1 else "",
                            frozenset(options)))
    return mounts


def read_mounts() -> list[Mount]:
    """This process's mounts (an empty list where ``/proc`` is not Linux's: then nothing is known as shared)."""
    try:
        return parse_mountinfo(Path("/proc/self/mountinfo").read_text())
    except OSError:
        return []


def mount_of(path: str | os.PathLike[str], mounts: Iterable[Mount]) -> Mount | None:
    """The mount holding ``path``: the longest mount point above its real path (the nearest existing ancestor's
    when it does not exist yet); the last such mount wins (mounted over the earlier ones)."""
    real = Path(os.path.abspath(os.fspath(path)))
    probe = real
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    resolved = Path(os.path.realpath(probe)) / real.relative_to(probe)
    best: Mount | None = None
    for mount in mounts:
        point = Path(mount.mount_point)
        if (resolved == point or point in resolved.parents) and (
                best is None or len(point.parts) >= len(Path(best.mount_point).parts)):
            best = mount
    return best


@dataclass(frozen=True)
class LocalPath:
    """A local path a run reads or writes: what it is (``role``), and what it needs of a shared filesystem."""

    role: str
    path: str
    store: bool = False
    """The embedded store: never across machines (SQLite on a network filesystem, see the module docstring)."""
    flock: bool = False
    """Fenced with ``flock``: needs a filesystem carrying it between hosts."""


_SQLITE = ("sqlite:///", "sqlite+pysqlite:///")


def _sqlite_file(url: str) -> str | None:
    lowered = url.strip().lower()
    for prefix in _SQLITE:
        if lowered.startswith(prefix):
            rest = url.strip()[len(prefix):].split("?", 1)[0]
            return None if rest in ("", ":memory:") else rest
    return None


def _plain_path(value: Any) -> str | None:
    text = str(value or "").strip()
    if not text:
        return None
    if text.startswith("file://"):
        return text[len("file://"):]
    return None if "://" in text or text.startswith("memory:") else text


def local_paths(backend_url: str, config: Mapping[str, Any]) -> list[LocalPath]:
    """The local paths of a run of ``config`` on the backend ``backend_url``: the embedded store, and the paths its
    connector class reads or writes (FileSink's and DirectorySource's ``directory``, ParquetSink's ``path``
    without a scheme, a SQL connector's SQLite ``connection.url``)."""
    found: list[LocalPath] = []
    store = _sqlite_file(backend_url)
    if store is not None:
        found.append(LocalPath("the embedded store", store, store=True))
    cls = str(config.get("connector.class", "")).rpartition(".")[2]
    directory = _plain_path(config.get("directory"))
    if cls == "FileSink" and directory:
        found.append(LocalPath("the FileSink directory", directory, flock=True))
    elif cls == "DirectorySource" and directory:
        found.append(LocalPath("the DirectorySource directory", directory))
    path = _plain_path(config.get("path"))
    if cls == "ParquetSink" and path:
        found.append(LocalPath("the ParquetSink path", path))
    db = _sqlite_file(str(config.get("connection.url", "")))
    if cls in ("SqlSink", "SqlSource") and db:
        found.append(LocalPath(f"the {cls} database", db))
    return found


def problems(paths: Iterable[LocalPath], mounts: Iterable[Mount]) -> list[str]:
    """One sentence per path another machine cannot use safely: the path, its filesystem, why, and the fix."""
    mounts = list(mounts)
    out = []
    for lp in paths:
        mount = mount_of(lp.path, mounts)
        where = mount.describe() if mount is not None else "an unknown filesystem"
        if lp.store:
            out.append(f"{lp.role} {lp.path} ({where}) is a SQLite file, which other workers cannot share (on "
                       "their own disks they open stores of their own; on a network filesystem SQLite's locks and "
                       "WAL do not hold): use the Kafka backend (a pyconnect connection with kafka://...)")
        elif mount is None or not mount.shared:
            fix = ("the lake on object storage (s3://, gs://, abfs://)" if "Parquet" in lp.role else
                   "a path on a shared filesystem (NFS, CephFS, ...)" if not lp.flock else
                   "a directory on NFS or CephFS, or the lake on object storage")
            out.append(f"{lp.role} {lp.path} is on this worker's own disk ({where}), which other workers do not "
                       f"see: use {fix}")
        elif lp.flock and not mount.flock_across_hosts:
            out.append(f"{lp.role} {lp.path} is on {where}, whose flock does not exclude other hosts, so two "
                       "attempts on two workers could both write: use a directory on NFS (without nolock or "
                       "local_lock) or CephFS, or the lake on object storage")
    return out
