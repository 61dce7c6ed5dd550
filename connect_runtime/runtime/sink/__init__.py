"""One bounded sink run: ``run_sink(config, backend, ...)`` → :class:`SinkRunResult`.

Fan-out (each task its own run, e.g. an Airflow mapped task instance): :func:`plan_sink` and
:func:`run_sink_task` (:mod:`.fanout`).

Where things are: :mod:`.config` (fields and validation), :mod:`.planning` (assignment, start positions,
targets), :mod:`.task` (one task's poll → put loop), :mod:`.commits` (``pre_commit``, committable offsets, the
fenced group commit, rewind on failure), :mod:`.contexts`, :mod:`.result`, :mod:`.run` (the run itself); retry
bounds and dead letters are :mod:`connect_runtime.runtime.errors`'.

What a run does, in order (Kafka Connect's ``WorkerSinkTask``, bounded):

1. Validate the raw config against the runtime's sink fields (:data:`SINK_CONFIG`) and the
   connector's ``config_def()`` (through ``connector.validate``): one :class:`ConfigError` names
   every bad field. Exactly one of ``topics`` / ``topics.regex`` is required.
2. Start the connector (with a :class:`SinkConnectorContext`) and ask it for
   ``task_configs(tasks.max)``. The partitions of the topics are sorted and assigned round-robin to
   the tasks; each task runs in its own thread with its own read_committed consumer in the group
   ``connect-<name>`` and its own transform/convert pipeline.
3. Each partition starts at the group's committed offset (or the beginning of the partition),
   unless the task rewinds it with ``context.offset(...)`` in ``open()``; a rewind asked for later
   takes effect before the next poll.
4. The run reads each partition up to its target and then stops:

   - ``until_offsets={topic: {partition: offset}}`` (partition as int or str; offset = next offset
     NOT to read), or the shape of an upstream source run's ``SourceRunResult.to_dict()``,
     ``{"ranges": {topic: {"<p>": [from, to]}}}`` whose target is ``to``. With ``until_offsets``,
     **a partition it does not name has nothing to read** in this run, and a target beyond the end
     of its partition (as the run started) is lowered to that end, with a warning.
   - without it: the end offsets of the topics as they were when the run started (data committed
     while the run goes is left for the next run).
   - ``max_records`` (records consumed: delivered, filtered or dead-lettered) and ``max_seconds``
     end the run earlier; it still makes its final commit.

5. Commit points (when: :mod:`.task`; what is committed: :mod:`.commits`): dead-letter records are
   flushed first, then ``pre_commit(current_offsets)`` runs and exactly what it returns is committed
   for the group; ``{}`` commits nothing.
6. The end: the final commit, then ``close(partitions)``, then ``stop()``.

KIP-275 ``context.is_closing()``: true while ``pre_commit`` runs for the run's final commit (the
runtime never takes partitions away within a run, so that is the only closing commit), false at
every other moment. Kafka Connect proposed KIP-275 but never shipped it; this behaviour is
airflow-pyconnect's own.

Generations (zombie fencing): every run registers a new generation of the connector in the
registry (:mod:`connect_runtime.runtime.registry`) before it reads the group's offsets; tasks see it
as ``context.generation``. A newer run fences the older one's group-offset commits: the older run's
next commit raises :class:`ProducerFencedError` and commits nothing (Kafka Connect gets the same from
the consumer group generation); how, per backend, and what a backend without transactional group offsets
cannot fence: :class:`~connect_runtime.runtime.fencing.SinkCommitFence`.

Failures (Kafka Connect's ``WorkerSinkTask`` where it defines them, bounded where it is not):

- a :class:`RetriableError` from ``put`` redelivers the same records after a wait, within the
  redelivery bound (both: :mod:`connect_runtime.runtime.errors`). When the bound runs out the run
  fails naming what it waited for.
- an exception from ``flush``/``pre_commit`` rewinds every partition of the task to its last
  committed offset (the start of the run, a rewind, or the last group commit) and delivers those
  records again (``WorkerSinkTask`` does the same), within the same bound; for the final commit too,
  as long as the run may still deliver (else it fails, nothing more committed).
- offsets ``pre_commit`` returns beyond what the task was given, or for partitions not assigned to
  it, are ignored with a warning naming the partition (as Kafka Connect does).
- any other exception from ``put`` (a conversion under ``errors.tolerance=none``, or a record
  reported through the errant record reporter under ``errors.tolerance=none``) fails the run with a
  :class:`ConnectError` naming the connector, the task and the cause (chained). A failed run makes
  no further ``pre_commit`` or commit in any of its tasks: the group keeps what was committed
  before. The tasks still get ``close`` and ``stop``.
- a task that does not return within ``task.shutdown.graceful.timeout.ms`` after the run stopped
  (its ``max_seconds`` passed, or another task failed) fails the run with a :class:`WaitTimeoutError`
  naming it; it is abandoned (a daemon thread) and can commit nothing any more, as in a source run.

Config handed to the connector and its tasks: strings, except ``Type.PASSWORD`` values, which stay
:class:`Password` objects (as in a source run). ``tasks.max`` above :data:`MAX_TASKS` is refused by
validation, and a connector that returns more task configs than ``tasks.max`` fails the run.

Error tolerance ``all`` (:mod:`connect_runtime.runtime.errors`): records whose conversion or transform
fails, and records a task reports with ``context.errant_record_reporter.report(record, exc)``, go to
``errors.deadletterqueue.topic.name`` (created at the start of the run if missing); without a dead letter
topic they are skipped and counted (``SinkRunResult.skipped``, a log line).

Pause: ``context.pause(tp)`` / ``context.resume(tp)``, bounded by ``pause.timeout.ms`` (:mod:`.task`).

Delivery guarantee: offsets are committed only after ``pre_commit`` says the records before them
are durable, so a run killed at any instant and started again delivers every record at least once.
A connector that keeps its offsets in its destination (rewinds in ``open`` and returns ``{}`` from
``pre_commit``) gets exactly-once.
"""

from connect_runtime.runtime.errors import DEFAULT_RETRY_BOUND_S
from connect_runtime.runtime.fencing import SINK_COMMITS_STORE
from connect_runtime.runtime.sink.config import SINK_RUN_CONFIG, validate_sink_config
from connect_runtime.runtime.sink.fanout import plan_sink, run_sink_task
from connect_runtime.runtime.sink.result import PROGRESS_INTERVAL_S, ProgressCallback, SinkRunResult
from connect_runtime.runtime.sink.run import destination_mirror, run_sink

__all__ = [
    "DEFAULT_RETRY_BOUND_S",
    "PROGRESS_INTERVAL_S",
    "SINK_COMMITS_STORE",
    "SINK_RUN_CONFIG",
    "ProgressCallback",
    "SinkRunResult",
    "destination_mirror",
    "plan_sink",
    "run_sink",
    "run_sink_task",
    "validate_sink_config",
]
