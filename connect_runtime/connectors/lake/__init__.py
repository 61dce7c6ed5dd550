"""Lake connectors: :class:`ParquetSink` writes topic partitions to Parquet files on any fsspec filesystem
(``file://``, ``s3://``, ``memory://``...), exactly once, following Kafka Connect's S3 sink conventions.

Where things are: ``_config`` (the keys, ``storage.options`` as a secret), ``_partitioner`` (default, field and
time partitioners, timestamp extractors), ``_rows`` (record values into Arrow rows, column types), ``_typed`` (the Arrow schema of a Connect schema,
Struct values into columns; a value schema change rotates the file), ``store`` (names,
footers, atomic publication, recovery from the files), ``_writer`` (one partition's commit groups and fence),
``sink`` (the connector and its task), ``reader`` (which files hold a committed range: :func:`files_for`).

- **Layout**: ``<path>/<topics.dir>/<topic>/partition=<p>/<topic>+<p>+<start>.parquet`` (the field or time
  partition in place of ``partition=<p>``), ``start`` zero-padded to 10 digits; the file holds the records of
  ``[start, end)`` of that topic partition, ``end`` in its footer metadata. Each record value is one row.
- **The files are the state**: ``open()`` lists the partition's files, reads the footers of the last commit group
  and rewinds the consumer to its end; nothing but data files is ever left under ``path`` (no manifest, no
  marker; temporary names of killed runs are removed by the next ``open()``).
- **Commit points**: ``put`` cuts a group at ``flush.size`` records or ``rotate.interval.ms`` and asks for a
  commit; ``pre_commit`` publishes ready groups and returns ``{}``; the run's final commit (``is_closing()``)
  publishes the remainder as a last, smaller file, so a bounded run leaves everything it was given in the lake.
- **Fencing**: a file's footer names its generation; a run finding a newer generation's file before publishing is
  fenced (:class:`ProducerFencedError`); a file is never replaced (conditional create), and a name taken with the
  identical range (a dead or older run's copy of the same records) is kept instead of written twice. A run whose
  next name another (not newer) run of the connector took with another range re-reads the position from the
  files, drops what it buffered and rewinds its consumer there (``context.offset``): overlapping runs go on or
  stop at once.
- **Offsets management** (KIP-875): ``read_offsets`` / ``alter_offsets`` read and move the position in the files.
- **Reading an interval**: :func:`files_for` resolves a committed range (a source run's ranges) to exactly the
  files that hold it; ``connect_runtime.spark.read_lake`` reads them with ``spark.read.parquet``.

Details, and where this differs from Kafka Connect's S3 sink: ``docs/lake.md``.
"""

from connect_runtime.connectors.lake._config import VERSION as VERSION
from connect_runtime.connectors.lake.reader import LakeFile, LakeRangeError, committed_files, files_for
from connect_runtime.connectors.lake.sink import ParquetSink, ParquetSinkTask
from connect_runtime.connectors.lake.store import recover

__all__ = ["LakeFile", "LakeRangeError", "ParquetSink", "ParquetSinkTask", "committed_files", "files_for", "recover"]
