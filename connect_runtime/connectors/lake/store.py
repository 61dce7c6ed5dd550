"""The lake as the state (Kafka Connect's S3 and HDFS sinks make their objects the truth): names, listing, footers,
atomic publication and recovery, over any fsspec filesystem.

- A data file is ``<path>/<topics.dir>/<topic>/<encoded partition>/<topic>+<p>+<start>.parquet``, ``start``
  zero-padded to 10 digits (Kafka Connect's ``filename.offset.zero.pad.width``). Its Parquet key-value metadata
  holds ``pyconnect.start_offset`` / ``pyconnect.end_offset`` (the file covers offsets ``[start, end)`` of the
  topic partition; its rows are the records of that range the sink kept), ``pyconnect.generation`` (the run that
  wrote it), ``pyconnect.connector`` and ``pyconnect.group_size``. Recovery reads footers only, never data.
- **A commit group** is what one topic partition publishes at one commit point: one file per encoded partition,
  all named by the group's start and covering the same range. The group is committed once all ``group_size``
  files exist; a group a killed run left incomplete is removed by the next ``open()`` (its records come again).
  Under the default partitioner every group is one file.
- **Atomic appearance**: on object stores (``s3``, ``gs``, ``az``...) the file is one PUT of the complete bytes
  under its final name, which is atomic; with ``If-None-Match: *`` on S3, so it never replaces an existing
  object. On a local filesystem it is written to a dot-prefixed temporary name in the same directory (no reader
  globs it; Spark and Hive skip ``.`` and ``_`` names), fsynced, then hard-linked to its final name (which fails
  if the name exists: never a replace) and the temporary name removed. Other filesystems (``memory://``) check
  the name and move. Temporary names a killed run left are removed by the next ``open()``.
- :func:`recover` finds the committed position: the end of the last complete group.
- **TLS and credentials.** On S3 (s3fs) the endpoint and its CA come from ``storage.options``
  (``client_kwargs: {endpoint_url: https://..., verify: <CA file>}``). A certificate the client refuses (not
  signed by a CA it trusts, expired, for another host) is not retried: botocore retries every connection error
  with backoff (about 15 s for a TLS failure), and no retry mends a certificate. :meth:`Lake.failure` turns a
  storage failure into one error naming the lake, the endpoint and the cause (the certificate, or the credentials
  refused), never a credential.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from connect_runtime.api.errors import ConnectError
from connect_runtime.api.records import TopicPartition
from connect_runtime.api.tls import tls_failure
from connect_runtime.connectors._fs import fsync_dir
from connect_runtime.connectors.lake._config import LakeConfig

log = logging.getLogger(__name__)

PAD = 10
_OBJECT_STORES = {"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "oss"}
META_START, META_END = b"pyconnect.start_offset", b"pyconnect.end_offset"
META_GENERATION, META_CONNECTOR, META_GROUP = b"pyconnect.generation", b"pyconnect.connector", b"pyconnect.group_size"


class FileExists(ConnectError):
    """The final name is taken (by a file of another run or a retry of this one)."""


@dataclass(frozen=True)
class Footer:
    """What a data file's footer says (read without its data)."""

    path: str
    start: int
    end: int
    generation: int
    group_size: int
    rows: int
    schema: pa.Schema | None = field(default=None, compare=False)


@dataclass
class Recovered:
    """One topic partition as found in the lake."""

    next_offset: int | None = None
    """The next offset to write (``None``: nothing written)."""
    generation: int = -1
    """The newest generation among the last group's files."""
    known: set[str] = field(default_factory=set)
    """Every data file of the partition seen."""
    schema: pa.Schema | None = None
    incomplete: list[Footer] = field(default_factory=list)
    """Files of groups a killed run left incomplete (above the committed position)."""

    @property
    def unfinished(self) -> tuple[int, int] | None:
        """``(start, end)`` of the one incomplete group right at the committed position, which the next run
        completes (it writes that range again, cut at ``end``: the same records give the same names, so the
        files there are kept and the missing ones added, as Kafka Connect's S3 sink rewrites the same objects
        after a crash); ``None`` when there is none, or several (those are removed)."""
        ranges = {(f.start, f.end) for f in self.incomplete}
        if len(ranges) != 1:
            return None
        start, end = next(iter(ranges))
        return (start, end) if self.next_offset in (None, start) else None


def file_name(tp: TopicPartition, start: int) -> str:
    return f"{tp.topic}+{tp.partition}+{start:0{PAD}d}.parquet"


class Lake:
    """The root of one sink's files. ``storage.options`` go to fsspec only; messages name ``where`` (the URL
    without credentials: a URL's user-info is cut off)."""

    def __init__(self, cfg: LakeConfig) -> None:
        self.cfg = cfg
        try:
            self.fs, root = fsspec.core.url_to_fs(cfg.path, **cfg.storage_options)
        except (ImportError, ValueError, TypeError) as exc:
            raise ConnectError(f"ParquetSink {cfg.name!r}: cannot open the filesystem of {self.where}: "
                               f"{type(exc).__name__}: {scrub(str(exc), cfg)}") from None
        self.root = root.rstrip("/")
        protocols = {self.fs.protocol} if isinstance(self.fs.protocol, str) else set(self.fs.protocol)
        self.local = bool(protocols & {"file", "local"})
        self.object_store = bool(protocols & _OBJECT_STORES)
        if protocols & {"s3", "s3a"}:
            _fail_fast_on_tls(self.fs)

    @property
    def where(self) -> str:
        return re.sub(r"//[^/@]*@", "//", self.cfg.path)

    @property
    def endpoint(self) -> str | None:
        """The server ``storage.options`` name (s3fs's ``client_kwargs.endpoint_url`` or ``endpoint_url``), without
        user-info; ``None`` when they name none (AWS's own endpoints, a local filesystem)."""
        opts = self.cfg.storage_options
        client = opts.get("client_kwargs")
        url = (client.get("endpoint_url") if isinstance(client, dict) else None) or opts.get("endpoint_url")
        return re.sub(r"//[^/@]*@", "//", url) if isinstance(url, str) and url else None

    def failure(self, doing: str, exc: BaseException) -> ConnectError:
        """One error for a storage failure while ``doing`` (``"reading the offsets in"``) the lake: its URL, the
        endpoint, and the cause: the certificate refused (:func:`~connect_runtime.api.tls.tls_failure`), the
        credentials or permissions refused (``PermissionError``), else the filesystem's own words; credentials
        scrubbed."""
        at = f" at {self.endpoint}" if self.endpoint else ""
        tls = tls_failure(exc)
        if tls is not None:
            cause = (f"the TLS handshake with the server{at} failed: {tls}; check storage.options client_kwargs.verify "
                     "(the CA file that signed the server's certificate; the system's CAs when unset)")
        elif isinstance(exc, PermissionError):
            cause = (f"the server{at} refused access ({type(exc).__name__}: {exc}): check the credentials in "
                     "storage.options (key, secret) and what they may do")
        else:
            cause = f"{type(exc).__name__}: {exc}" + (f" (server{at})" if at else "")
        return ConnectError(f"ParquetSink {self.cfg.name!r}: {doing} {self.where} failed: {scrub(cause, self.cfg)}")

    def topic_dir(self, topic: str) -> str:
        return f"{self.root}/{self.cfg.topics_dir}/{topic}"

    def dir_of(self, tp: TopicPartition, encoded: str) -> str:
        return f"{self.topic_dir(tp.topic)}/{encoded}"

    # -- listing and footers -------------------------------------------------------------------------

    def _names(self, tp: TopicPartition) -> list[str]:
        """Every path under the partition's directories whose name is one of ``tp``'s (data or temporary)."""
        base = self.topic_dir(tp.topic)  # every partitioner's directories: a config that changed it finds them all
        self.fs.invalidate_cache(base)
        try:
            paths = self.fs.find(base)
        except FileNotFoundError:
            return []
        prefix = f"{tp.topic}+{tp.partition}+"
        return [p for p in paths if p.rsplit("/", 1)[-1].lstrip(".").startswith(prefix)]

    def data_files(self, tp: TopicPartition) -> dict[str, int]:
        """``tp``'s data files and their start offsets."""
        rx = re.compile(re.escape(f"{tp.topic}+{tp.partition}+") + r"(\d+)\.parquet$")
        out = {}
        for p in self._names(tp):
            m = rx.match(p.rsplit("/", 1)[-1])
            if m:
                out[p] = int(m.group(1))
        return out

    def remove_temporary(self, tp: TopicPartition) -> None:
        """Remove temporary names a killed run left for ``tp``."""
        for p in self._names(tp):
            if p.rsplit("/", 1)[-1].startswith("."):
                log.info("ParquetSink %r: removing %s (a temporary file of a run that did not finish it)",
                         self.cfg.name, p)
                with contextlib.suppress(FileNotFoundError):
                    self.fs.rm(p)

    def footer(self, path: str) -> Footer:
        # not from a cached listing of its directory: fsspec shares one filesystem object per process, and a
        # listing another task's find() stored while a file was being published lacks that file (s3fs: the
        # open would raise FileNotFoundError for a file the fresh listing just returned)
        self.fs.invalidate_cache(path)
        try:
            with self.fs.open(path, "rb") as fh:
                pf = pq.ParquetFile(fh)
                meta, schema, rows = pf.schema_arrow.metadata or {}, pf.schema_arrow, pf.metadata.num_rows
        except (OSError, pa.ArrowException) as exc:
            raise ConnectError(f"ParquetSink {self.cfg.name!r}: cannot read the footer of {path}: {exc}") from exc
        try:
            return Footer(path, int(meta[META_START]), int(meta[META_END]), int(meta[META_GENERATION]),
                          int(meta.get(META_GROUP, b"1")), rows, schema.remove_metadata())
        except (KeyError, ValueError):
            raise ConnectError(f"ParquetSink {self.cfg.name!r}: {path} has a data file's name but not the "
                               "pyconnect.* footer metadata of one: it was written by something else; move it "
                               "out of the sink's directories") from None

    # -- writing -------------------------------------------------------------------------------------

    def publish(self, path: str, data: bytes) -> None:
        """Make ``data`` appear whole under ``path``, never replacing a file: :class:`FileExists` if taken."""
        if self.object_store:
            try:
                self.fs.pipe_file(path, data, mode="create")
            except (FileExistsError, OSError) as exc:
                if isinstance(exc, FileExistsError) or "PreconditionFailed" in str(exc) or "412" in str(exc):
                    raise FileExists(path) from None
                raise
            return
        directory, name = path.rsplit("/", 1)
        tmp = f"{directory}/.{name}.{uuid.uuid4().hex[:12]}.tmp"
        if self.local:
            os.makedirs(directory, exist_ok=True)
            with open(tmp, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            try:
                os.link(tmp, path)
            except FileExistsError:
                raise FileExists(path) from None
            finally:
                os.unlink(tmp)
            fsync_dir(directory)
            return
        self.fs.makedirs(directory, exist_ok=True)
        self.fs.pipe_file(tmp, data)
        if self.fs.exists(path):
            self.fs.rm(tmp)
            raise FileExists(path)
        self.fs.mv(tmp, path)

    def remove(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.fs.rm(path)


def encode_file(table: pa.Table, *, start: int, end: int, generation: int, connector: str, group_size: int,
                codec: str) -> bytes:
    """The bytes of one data file with its ``pyconnect.*`` footer metadata."""
    meta = dict(table.schema.metadata or {})
    meta.update({META_START: str(start).encode(), META_END: str(end).encode(),
                 META_GENERATION: str(generation).encode(), META_CONNECTOR: connector.encode(),
                 META_GROUP: str(group_size).encode()})
    buf = io.BytesIO()
    pq.write_table(table.replace_schema_metadata(meta), buf, compression=codec)
    return buf.getvalue()


def recover(lake: Lake, tp: TopicPartition) -> Recovered:
    """The committed position of ``tp``: the end of its last complete commit group (footers of the last groups
    only). Groups above it that are incomplete are returned in ``incomplete`` (``open()`` removes them)."""
    files = lake.data_files(tp)
    out = Recovered(known=set(files))
    by_start: dict[int, list[str]] = {}
    for path, start in files.items():
        by_start.setdefault(start, []).append(path)
    for start in sorted(by_start, reverse=True):
        footers = [lake.footer(p) for p in sorted(by_start[start])]
        out.generation = max([out.generation, *(f.generation for f in footers)])
        ranges = {(f.start, f.end) for f in footers}
        if len(ranges) > 1 or any(f.start != start for f in footers):
            raise ConnectError(
                f"ParquetSink {lake.cfg.name!r}: {tp.topic}-{tp.partition} has files starting at offset {start} that "
                f"cover different ranges ({', '.join(f'{f.path} [{f.start}, {f.end})' for f in footers)}): "
                "written by two runs at once (see docs/lake.md, zombie window); keep one and remove the others")
        if len(footers) < footers[0].group_size:
            out.incomplete.extend(footers)
            continue
        out.next_offset = footers[0].end
        out.schema = footers[-1].schema
        break
    return out


_VISIBLE = {"endpoint_url", "region_name", "verify", "signature_version", "addressing_style"}
"""``storage.options`` keys (at any depth) whose values are no secret and name what failed: kept in messages (an
endpoint URL's user-info is still hidden)."""


def scrub(text: str, cfg: LakeConfig) -> str:
    """``text`` without the string values of ``storage.options`` (credentials), but the endpoint, region and CA
    file (:data:`_VISIBLE`)."""
    for v in sorted(set(_strings(cfg.storage_options)), key=len, reverse=True):
        if len(v) >= 4:
            text = text.replace(v, "[hidden]")
    return text


def _strings(value: Any, key: str = "") -> list[str]:
    if isinstance(value, str):
        if key in _VISIBLE:
            found = re.search(r"//[^/@:]*:([^/@]+)@", value)  # the password of the URL's user-info
            return [found.group(1)] if found else []
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in _strings(v, str(k))]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return []


def _raise_certificate_failure(caught_exception: BaseException | None = None, **_: Any) -> None:
    """botocore's ``needs-retry`` hook: a certificate failure ends the request at once (it is raised again here,
    before botocore's retry handler sleeps and retries it); anything else is left to the retry handler."""
    if caught_exception is not None and tls_failure(caught_exception) is not None:
        raise caught_exception


def _fail_fast_on_tls(fs: Any) -> None:
    """Register :func:`_raise_certificate_failure` on the s3fs filesystem's botocore client, first (before botocore's
    retry handler; the client is created here, without a request; once per client). Without that client (s3fs
    changed) the retries stay: slower, still correct."""
    try:
        fs.connect()
        events = fs.s3.meta.events
    except Exception as exc:  # not s3fs as known: the failure, if any, comes again at the first request
        log.debug("no fail-fast hook on %s: %s", type(fs).__name__, type(exc).__name__)
        return
    events.register_first("needs-retry.s3", _raise_certificate_failure, unique_id="pyconnect-lake-tls-fail-fast")


__all__ = ["PAD", "FileExists", "Footer", "Lake", "Recovered", "encode_file", "file_name", "recover", "scrub"]
