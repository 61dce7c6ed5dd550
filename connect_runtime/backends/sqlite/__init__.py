"""The embedded backend: records, source offsets, group offsets and producer epochs in one SQLite file.

URL: ``sqlite:///path/to/file.db`` (``sqlite:////abs/path.db`` for an absolute path, ``sqlite:///rel.db``
relative to the working directory). ``:memory:`` is refused: the processes of a deployment (Airflow
task instances, retries, a Spark reader) must all see the same file. Parent directories and the
schema are created on open.

Settings (``open_backend(url, settings)``):

- ``busy.timeout.ms`` (default 30000): how long a writer waits for the write lock (and a reader for
  a checkpoint) before :class:`BackendUnavailableError`. Blocking calls that take a ``timeout`` wait
  at most the smaller of the two.
- ``synchronous`` (``NORMAL`` default, ``FULL``, ``EXTRA``): SQLite's ``PRAGMA synchronous`` in WAL
  mode. With ``NORMAL`` a committed transaction survives a crash or ``SIGKILL`` of the writing
  process (the WAL is in the OS page cache), but the last commits may be rolled back by a power loss
  or an OS crash; the file is never corrupted either way. ``FULL`` fsyncs the WAL at every commit,
  so commits also survive a power loss, at the price of one fsync per transaction.
- ``default.partitions`` (default 1): partition count of topics created on first write.
- ``cluster.id`` (default none): prefix of transactional ids; without it, ids have no prefix.

Read-only (``open_backend(url, settings, read_only=True)``, what ``pyconnect offsets get`` and
``topics list|read`` use): nothing is created, neither the file nor its folders nor the schema; a path
that names no file, or a file without this backend's schema, is a :class:`BackendError` naming the
path. Connections open with SQLite's ``mode=ro``; a file in a folder the user cannot write (so SQLite
cannot create the WAL's ``-shm`` index) is opened ``immutable`` when it has no pending WAL content,
else the error says why it cannot be read. Every write on a read-only backend fails.

The file's identity (``st_dev``, ``st_ino``) is recorded when the backend opens it and checked before
every write transaction (one ``stat`` per commit) and whenever a connection opens: a database file
deleted or replaced (``rm``, ``mv``, a restored copy) while a run uses it makes the next commit fail
with a :class:`BackendError` naming the path, instead of committing into an unlinked file that nobody
will ever read again. (Deleting or replacing a live SQLite file is unsafe in SQLite itself: the old
file's ``-wal`` left next to the path may be applied to whatever file is opened there next. The check
stops this backend writing more; it cannot undo that.)

How it works:

- One short SQLite transaction per transaction boundary. Producers buffer ``send`` in memory; a
  commit (or a non-transactional ``flush``) is ``BEGIN IMMEDIATE`` → check this producer's epoch →
  assign offsets per partition from the ``partitions.next_offset`` high-water row → ``executemany``
  the rows → upsert/delete source offsets → advance the high-water rows → ``COMMIT``. Readers never
  see uncommitted records because nothing is written before the commit; abort drops the buffer.
- ``BEGIN IMMEDIATE`` takes the single write lock up front, so offsets are assigned race-free by any
  number of processes writing the same file (WAL mode: readers never block the writer).
- Fencing (KIP-618): ``init_transactions`` bumps the epoch of its ``transactional_id`` in its own
  transaction; a commit whose producer no longer holds the current epoch raises
  :class:`ProducerFencedError` and writes nothing.
- A record without a partition goes where :func:`connect_runtime.backends.base.default_partition` says
  (``crc32(key) % partitions``, or partition 0 without a key); a record without a timestamp gets the
  commit time (ms, one clock read per commit). Topics are created on first write with
  ``default.partitions``; a partition index out of range is a :class:`DataError` naming the topic and
  partition, and the whole commit writes nothing.
- Records are kept forever (no retention): ``beginning_offsets`` is 0 for every partition today.
- Every producer, consumer and offset store opens its own connection (lazily, on first use, so an
  object may be created by one thread and used by another); the :class:`SQLiteBackend` keeps one
  connection per thread for its own calls, and closes everything on :meth:`SQLiteBackend.close`.

Where things are (one role per module; the schema and the row-id packing of records are drawn in
:mod:`.schema`'s docstring):

==================  =====================================================================================
``backend``         :class:`SQLiteBackend`: opening, handing out producers/consumers/stores, topics,
                    ``update_entry``, ``read_range``, closing everything
``settings``        the URL (:func:`parse_url`) and the settings above, checked
``connection``      ``_Db`` (pragmas, the file's identity, creating or checking the schema, ``sqlite3``
                    errors translated) and ``_Conn`` (one object's lazy connection); the write transaction
``schema``          tables, row-id packing (``OFFSET_BITS``), shared SQL, topic metadata
``producers``       :class:`SQLiteProducer`, :class:`SQLiteTransactionalProducer`: buffering, offsets
                    assigned at commit, grouping by partition
``fencing``         producer epochs and connector generations, checked inside a commit
``offsets``         :class:`SQLiteOffsetStore` and the offset rows every writer writes (KIP-618 mirror)
``consumer``        :class:`SQLiteConsumer`: assignment, positions, polling, group commits
``columnar``        ``read_range_batches``: windows of records as concatenated columns
``headers``         :func:`encode_headers`, :func:`decode_headers`: the stored header encoding
==================  =====================================================================================
"""

from connect_runtime.backends.sqlite.backend import SQLiteBackend
from connect_runtime.backends.sqlite.consumer import SQLiteConsumer
from connect_runtime.backends.sqlite.headers import decode_headers, encode_headers
from connect_runtime.backends.sqlite.offsets import SQLiteOffsetStore
from connect_runtime.backends.sqlite.producers import SQLiteProducer, SQLiteTransactionalProducer
from connect_runtime.backends.sqlite.schema import DEFAULT_OFFSET_STORE, OFFSET_BITS
from connect_runtime.backends.sqlite.settings import parse_url

__all__ = [
    "DEFAULT_OFFSET_STORE",
    "OFFSET_BITS",
    "SQLiteBackend",
    "SQLiteConsumer",
    "SQLiteOffsetStore",
    "SQLiteProducer",
    "SQLiteTransactionalProducer",
    "decode_headers",
    "encode_headers",
    "parse_url",
]
