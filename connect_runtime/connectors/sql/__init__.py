"""SQL connectors on SQLAlchemy 2: :class:`SqlSource` (tables or a query into topics) and :class:`SqlSink`
(topics into tables, exactly once). Any database SQLAlchemy speaks; PostgreSQL (psycopg 3) and SQLite are
tested. SQLAlchemy and psycopg are imported when a connector starts, never when this package is imported.

Where things are: ``_common`` (connections, URLs, the JSON value forms), ``_source`` (SqlSource and its task),
``_reader`` (table discovery, one table's queries and position); ``sink`` (SqlSink), ``_config`` (its fields),
``_task`` (SqlSinkTask's loop), ``_buffer`` (records into rows), ``_writer`` (statements, COPY, the slow path),
``_tables`` (auto.create / auto.evolve), ``_typed`` (column types from a Connect schema, Struct values into
rows), ``_coerce`` (value coercion, type mapping), ``_fence`` (the offsets
table: claims, generation check, read/alter offsets), ``_errors`` (transient or data failures, messages),
``_tls`` (the ``connection.ssl*`` fields, refusals told apart from a database that is down).

Connection (both): ``connection.url`` (a SQLAlchemy URL; ``postgresql://`` means psycopg 3),
``connection.user`` / ``connection.password`` (``PASSWORD`` fields, masked everywhere; prefer them to
credentials inside the URL), ``connection.attempts`` (default 3) times (``connection.timeout.ms`` +
``connection.backoff.ms``, default 10000: Kafka Connect JDBC's names and defaults, shared by its source and
sink as here) bound the wait for an unreachable database; the error names the URL with its password hidden
(also a password inside the URL), so host and port. PostgreSQL sessions run with ``timezone=UTC``.
TLS (PostgreSQL): libpq's ``sslmode`` / ``sslrootcert`` / ``sslcert`` / ``sslkey`` in the URL's query or in the
fields ``connection.sslmode`` ... ``connection.sslkey`` (the fields win), the key's password in
``connection.sslpassword`` (``PASSWORD``); a refusal no retry fixes (an untrusted or expired certificate, a wrong
password, ``pg_hba.conf``) fails at the first attempt, naming server, cause and setting (``_tls``).

SqlSource
---------
Kafka Connect JDBC's names: ``table.include.list`` / ``table.exclude.list`` (``name`` or ``schema.name``;
default every table of the default schema) or ``query`` (wrapped as a subquery, the mode's conditions
added), ``mode`` = ``bulk`` | ``incrementing`` | ``timestamp`` | ``timestamp+incrementing``,
``incrementing.column.name``, ``timestamp.column.name``, ``topic.prefix`` (topic = prefix + table; in
query mode the prefix is the topic), ``batch.max.rows``, ``timestamp.delay.interval.ms``,
``poll.interval.ms`` and ``tasks.max`` (tables dealt round-robin over the tasks).

- **Queries** (one streaming cursor per pass, the look-ahead of one row): incrementing ``inc > last``;
  timestamp ``ts > last AND ts < now - delay``; timestamp+incrementing
  ``ts < now - delay AND ((ts = last AND inc > last_inc) OR ts > last)``; ordered by ``ts[, inc]`` / ``inc``.
  ``bulk`` reads the whole table once per run (no offsets, like Kafka Connect's bulk mode).
- **Interval mode** (Airflow): ``interval.start`` / ``interval.end`` (ISO 8601, e.g.
  ``{{ data_interval_start }}``) add ``ts >= start AND ts < end``; the source partition carries the
  interval, so each interval has its own committed offsets: a backfill reads each interval's rows, a
  rerun of an interval resumes after what it committed and writes nothing new (the run's
  ``interval_ranges`` still names the interval's records).
- **Offsets**, Kafka Connect JDBC's shapes: partition ``{"protocol": "1", "table": "<name>"}`` (query mode
  ``{"query": "query"}``), plus ``interval.start`` / ``interval.end`` in interval mode; offset
  ``{"incrementing": n}``, ``{"timestamp": epoch ms, "timestamp_nanos": ns within the second}`` or both.
- **Rows sharing a timestamp are never split across a committed offset** (mode ``timestamp``, where the
  JDBC connector loses rows): a poll ends where a timestamp group ends; with
  ``transaction.boundary=connector`` the task commits only after a group's last row (a group larger than
  ``batch.max.rows`` spans polls inside one transaction); and a row inside a group carries the offset
  just before its group, so even a commit inside a group (another boundary cut by ``max_records``)
  re-reads the group instead of losing its rest. Modes with an incrementing column commit after any row.
  Rows committed late with an older timestamp are what ``timestamp.delay.interval.ms`` is for.
- **A blink of the database** (a restart, the connection terminated by the server) is ridden out inside
  ``poll``, told apart from other failures as SqlSink does (``_errors.transient``): every table of the task
  rewinds to the last record the task handed to the runtime in this run (a pass that was open ends, what it
  fetched but did not hand out is forgotten; mode ``timestamp`` re-reads an unfinished group less the rows of
  it already handed, so nothing is read twice or skipped), the task connects again within
  ``connection.attempts`` x ``connection.backoff.ms`` (as Kafka Connect JDBC's ``CachedConnectionProvider``),
  and reads on. A database that stays down fails the run in that bound with one error naming host and port
  and what the task was reading; so does a connection lost ``connection.attempts`` times in a row, each right
  after connecting again. ``bulk`` keeps no position: a pass that already handed rows cannot resume, so a
  connection lost inside it fails the run (a rerun reads the table again; Kafka Connect JDBC re-reads the
  table, repeating rows).
- **Records**: key = the primary key columns as a JSON object (none without a primary key); value = the
  row as a JSON object, column names as keys; record timestamp = the timestamp column (epoch ms).

Value forms (lossless, and what the sink turns back into column values):

================================  ========================================================
column type                       JSON form
================================  ========================================================
integer, boolean, text            number, ``true``/``false``, string
float / double                    number; ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` as strings
numeric / decimal                 string of the exact decimal, e.g. ``"12.30"``
timestamp with time zone          ISO 8601 in UTC with offset: ``"2026-01-02T03:04:05.123456+00:00"``
timestamp (no zone)               ISO 8601 without offset: ``"2026-01-02T03:04:05.123456"``
date / time                       ``"2026-01-02"`` / ``"03:04:05.123456"``
bytes (bytea, blob)               standard base64, padded
json / jsonb                      the JSON value itself (object, array, ...)
uuid                              canonical string
interval                          ISO 8601 duration in days and seconds: ``"P1DT3723.5S"``
array                             JSON array of the element forms
================================  ========================================================

SqlSink
-------
``topics``, ``table.name.format`` (``${topic}``), ``insert.mode`` = ``insert`` | ``upsert`` | ``update``,
``pk.mode`` = ``none`` | ``record_key`` | ``record_value``, ``pk.fields``, ``auto.create``,
``auto.evolve`` (adds nullable columns), ``delete.enabled`` (a null value deletes the key's row; needs
``record_key``), ``batch.size`` (rows per statement), ``offsets.table.name``.

- **Exactly once**: the task writes rows inside one database transaction per commit point and, in the
  same transaction, the next offset of each partition into the offsets table
  (``pyconnect_sink_offsets``: connector, topic, kafka_partition, next_offset, generation). ``pre_commit``
  returns ``{}`` (the consumer group commits nothing); ``open()`` rewinds every partition to its stored
  offset with ``context.offset(...)``. A run killed at any instant leaves either the whole transaction
  or none of it, so a restarted run writes every record exactly once, also in ``insert`` mode without a key.
- **Fencing**: ``open()`` claims its partitions' rows for ``context.generation`` (a newer run's claim);
  every commit locks those rows and refuses (:class:`ProducerFencedError`, the transaction rolled back)
  when a newer generation claimed them: a zombie run cannot commit after its successor started.
- **Offsets management** (KIP-875): ``SqlSink.read_offsets(config)`` returns the stored next offsets of
  the connector (rows of ``name``; a claimed row without an offset is none) and the newest generation in
  the table (``-1``: no rows or no table), so the runtime starts a new run above it: a replaced offsets
  store (a new ``AIRFLOW_HOME``, SQLite to Kafka) continues from the destination instead of being
  refused there. ``SqlSink.alter_offsets(config, offsets, generation)`` sets (an int) or resets
  (``None``: the row keeps no offset, so the next run starts where the consumer group does) partitions in
  one transaction, the connector's rows locked, refused (:class:`ProducerFencedError`) when a newer
  generation already wrote there; every row of the connector takes ``generation``, fencing all older
  runs. Both validate the config (a :class:`ConfigError` naming the field) and connect as the task does;
  messages name ``table <name> on <url>`` with the password hidden.
- **Writing**: PostgreSQL ``insert`` uses ``COPY ... FROM STDIN`` (psycopg 3) inside the transaction;
  ``upsert`` is ``INSERT ... ON CONFLICT (key) DO UPDATE`` (SQLite the same, MySQL ``ON DUPLICATE KEY``,
  other dialects update-then-insert); ``update`` updates by key; other dialects use executemany. Values
  in the forms above are turned back by column type (decimal strings, ISO timestamps, base64 bytes,
  JSON); an object or array into a text column is written as its JSON text.
- **Bad input**: a record that does not fit (wrong type, too long, NOT NULL, invalid base64, not a JSON
  object) is one :class:`DataError` naming the record (``topic-partition@offset``), the table and, when it
  can be told, the field, found by retrying the failed batch row by row in savepoints; the open
  transaction is rolled back (what was committed stays, and the next run resumes after it); with
  ``errors.tolerance=all`` the record goes to the dead letter queue and the other rows are written. A
  missing table (without ``auto.create``) and a field the table has no column for (without
  ``auto.evolve``) fail the run at once (a :class:`ConfigError`, never retried) naming the table and field.
- **Empty and null values**: a null value (a tombstone) deletes the key's row with ``delete.enabled`` and
  is otherwise skipped; an empty object ``{}`` is a row of column defaults in ``insert`` mode.
- **auto.create / auto.evolve with a schema**: records carrying a value schema (a schema-aware converter's
  Struct values) get each column's type, nullability and default from it, Kafka Connect JDBC's PostgreSQL
  mapping (INT8/INT16 SMALLINT, INT32 INTEGER, INT64 BIGINT, FLOAT32 REAL, FLOAT64 DOUBLE PRECISION, BOOLEAN,
  STRING TEXT, BYTES BYTEA, Decimal NUMERIC(precision, scale), Date DATE, Time TIME, Timestamp TIMESTAMPTZ,
  ARRAY/MAP/STRUCT JSONB; optional or defaulted fields nullable, defaults as DEFAULT); auto.evolve refuses a
  new required field without a default (the run fails naming it). The values are bound with their types.
  ``_typed`` holds the rule; docs/schemas.md the tables and where they differ from JDBC.
- **auto.create / auto.evolve types without a schema**: a column's type comes from the non-null values of the
  batch that creates it,
  PostgreSQL's type first (other dialects in brackets), then SQLite's:

  * all ``true``/``false``: ``BOOLEAN``; all integers: ``BIGINT`` (beyond 64 bits: PostgreSQL ``NUMERIC``);
    numbers with a fraction (integers and SqlSource's ``"NaN"``/``"Infinity"``/``"-Infinity"`` among
    them): ``DOUBLE PRECISION`` / ``DOUBLE``; all objects or arrays: ``JSONB`` (``JSON``) / ``JSON``;
  * all ISO 8601 date-times **with an offset** (``2026-01-01T10:00:00+00:00``, ``...Z``, a space for
    ``T``, at most 6 fraction digits): ``TIMESTAMP WITH TIME ZONE`` / ``TEXT``;
  * all ISO dates ``YYYY-MM-DD``: ``DATE`` / ``DATE``;
  * all canonical decimals (``-?(0|[1-9][0-9]*)[.][0-9]+``: ``"12.50"``, ``"-0.5"``): ``NUMERIC``
    unconstrained (``NUMERIC(38, s)``, ``s`` the largest scale seen) / ``TEXT``;
  * anything else, or a mix (``"01234"``, ``"1.2.3"``, ``"1e5"``, ``"12"``, a date-time without offset,
    ``1`` and ``"a"``): ``TEXT`` (``VARCHAR(255)`` for a key column).

  So SqlSource's forms of NUMERIC and TIMESTAMPTZ columns come back as NUMERIC and TIMESTAMPTZ, and
  values round-trip exactly (a decimal keeps its digits and scale, a timestamp its instant). SQLite has
  no such types: its columns keep the exact text. A later value that does not fit the type chosen is
  bad input (above).
- **Several tasks** (``tasks.max`` > 1) creating or evolving the same table at once: as Kafka Connect's
  JDBC sink, a CREATE or ALTER that lost the race reads the table again and goes on. The CREATE runs in
  a short transaction of its own; before an ``ALTER TABLE ... ADD COLUMN`` a task commits the rows it
  wrote so far with their offsets (a commit point of its own), then alters in its own transaction, so
  two tasks never hold the table while waiting for each other (SQLite: inside the data transaction,
  ``BEGIN IMMEDIATE`` admits one writer).
"""

from connect_runtime.connectors.sql._source import SqlSource, SqlSourceTask
from connect_runtime.connectors.sql.sink import OFFSETS_TABLE, SqlSink, SqlSinkTask

__all__ = ["OFFSETS_TABLE", "SqlSink", "SqlSinkTask", "SqlSource", "SqlSourceTask"]
