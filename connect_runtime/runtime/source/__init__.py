"""One bounded run of a source connector: ``run_source(config, backend)``.

What happens, in order (Kafka Connect's ``Worker`` + ``AbstractWorkerSourceTask``, bounded; the lifecycle is
:class:`~connect_runtime.runtime.lifecycle.ConnectorRun`, filled in by :class:`~.run.SourceRun`):

1. The raw config is validated against the runtime's fields (``SOURCE_CONFIG`` plus :data:`RUN_CONFIG`), the
   connector's ``validate()`` and the transform/converter pipeline; every invalid field is named in one
   :class:`ConfigError` (:mod:`.config`).
2. The run begins a new generation of the connector, fencing the previous one (:mod:`..fencing`).
3. The connector is started with a context whose ``offset_storage_reader`` reads committed offsets
   (KIP-131), then asked for ``task_configs(tasks.max)``. Every task runs in its own thread with its
   own producer, offset store and pipeline (only the :class:`Backend` object is shared).
4. Each task loops: ``poll()`` -> pipeline (transforms, converters) -> ``send``. The loop is written once in
   :class:`~.task.SourceWorkerTask`; :class:`~.exactly_once.ExactlyOnceTask` (a transactional producer per task,
   offsets committed in the same transaction as the records, KIP-618) and :class:`~.at_least_once.AtLeastOnceTask`
   (flush the records, then write the offsets) differ only in their hooks. Where a task commits is its boundary
   strategy (:mod:`.boundaries`); how, the checkpoint's numbered steps (:mod:`.checkpoint`).
5. The run stops when every task is idle for ``poll.idle.timeout.ms``, or at ``max_records``
   (never more are written) or ``max_seconds``; every task then commits its last boundary and is
   stopped. A connector's ``request_task_reconfiguration()`` makes the runtime plan and run tasks
   again after the current ones finished (at most :data:`MAX_REPLANS` times, within the bounds).
6. Any failure aborts the open transactions and fails the run with the first error; what was
   committed before stays committed. A :class:`ProducerFencedError` (a newer instance of a task
   started) fails the run with that error and nothing more is committed.

Package layout: :mod:`.run` (entry points, the lifecycle hooks), :mod:`.config`, :mod:`.state`, :mod:`.contexts`,
:mod:`.task`, :mod:`.exactly_once`, :mod:`.at_least_once`, :mod:`.boundaries`, :mod:`.checkpoint`,
:mod:`.ledger` (the ranges record), :mod:`.result`.
"""

from connect_runtime.runtime.lifecycle import MAX_REPLANS
from connect_runtime.runtime.source.config import RUN_CONFIG, validate_source_config
from connect_runtime.runtime.source.ledger import interval_ranges
from connect_runtime.runtime.source.result import SourceRunResult
from connect_runtime.runtime.source.run import (
    SourceRun,
    SourceTaskRun,
    plan_source,
    run_source,
    run_source_task,
)
from connect_runtime.runtime.worker import MAX_TASKS

__all__ = [
    "MAX_REPLANS",
    "MAX_TASKS",
    "RUN_CONFIG",
    "SourceRun",
    "SourceRunResult",
    "SourceTaskRun",
    "interval_ranges",
    "plan_source",
    "run_source",
    "run_source_task",
    "validate_source_config",
]
