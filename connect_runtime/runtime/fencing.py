"""Fencing: how a run makes sure an older run of the same connector (a zombie: an Airflow retry's predecessor, a
worker that lost its lease) can commit nothing once it began (Kafka Connect's zombie fencing, KIP-618).

Every rule lives here and is decided by the backend's :class:`~connect_runtime.backends.base.Capabilities`,
never by its internals:

- **A run is a generation.** :func:`begin_generation` registers it in the connector registry before any offset is
  read; the registry entry's generation number only grows. Where a commit can check the generation itself
  (``Capabilities.commits_check_generation``: SQLite reads the registry inside the commit, through the
  :func:`generation_guard`), that is the whole fence. Where it cannot (Kafka), :func:`begin_generation` also
  initialises every transactional id the previous generation used (``Backend.fence_transactional_ids``), which
  aborts its open transactions and fences its producers.
- **A task of a plan joins its generation** (:func:`join_generation`): fenced at once when a newer plan or run
  of the connector (same identity) started.
- **An exactly-once task checks after ``init_transactions``** (:func:`check_still_newest`) where commits cannot
  check the generation: the newer generation may have fenced the transactional ids before this task initialised
  its own.
- Transactional ids are ``<cluster>-<connector>[-<identity>]-<task>`` (:func:`transactional_id`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from connect_runtime.api.errors import ProducerFencedError
from connect_runtime.backends.base import REGISTRY_STORE, Backend
from connect_runtime.runtime.registry import ConnectorRecord, Registry, registry_key
from connect_runtime.runtime.worker import Generation

log = logging.getLogger(__name__)


def transactional_id(name: str, scope: str, index: int, cluster_id: str | None) -> str:
    """The transactional id of task ``index`` of connector ``name`` under identity ``scope`` (KIP-618's
    ``<cluster>-<connector>-<task>``, with the identity between them when there is one)."""
    tid = f"{name}-{scope}-{index}" if scope else f"{name}-{index}"
    return f"{cluster_id}-{tid}" if cluster_id else tid


def generation_guard(name: str, generation: int, scope: str = "") -> tuple[str, bytes, int]:
    """What a producer or consumer checks inside each commit where the backend can
    (``Capabilities.commits_check_generation``): the commit is refused once the registry entry of
    ``(name, scope)`` holds a generation other than ``generation``."""
    return (REGISTRY_STORE, registry_key(name, scope), generation)


def begin_generation(backend: Backend, name: str, *, kind: str, connector_class: str, scope: str = "",
                     offsets_store: str | None = None, floor: int = 0, secrets: Sequence[str] = (),
                     task_ids: Callable[[int], str] | None = None, fence_timeout: float = 30.0) -> Generation:
    """Register a new generation before any offset is read, and fence every task of the previous one.

    ``task_ids(index)``: the transactional id of a task (a source run's producers); given, and the backend's
    commits cannot check the generation, every id the previous generation used (its task count is in the
    registry) is initialised, as Kafka Connect fences the zombies of the previous generation. A failure of that
    fencing is recorded as the new generation's end, then raised."""
    generation = Generation.begin(backend, name, kind=kind, scope=scope, connector_class=connector_class,
                                  offsets_store=offsets_store, floor=floor, secrets=secrets)
    previous = generation.previous
    if (task_ids is not None and previous is not None and previous.tasks and previous.state != "stopped"
            and not backend.capabilities.commits_check_generation):
        ids = [task_ids(i) for i in range(previous.tasks)]
        log.info("connector %s: fencing %d task(s) of generation %d (%s)", name, len(ids), previous.generation,
                 previous.state)
        try:
            backend.fence_transactional_ids(ids, fence_timeout)
        except BaseException as exc:  # recorded as this generation's end (any failure, even an interrupt), re-raised
            generation.finish(exc)
            raise
    return generation


def join_generation(backend: Backend, name: str, scope: str, generation: int, index: int) -> ConnectorRecord:
    """The registry entry of a plan's generation, for its task ``index``; :class:`ProducerFencedError` (nothing
    committed) when a newer plan or run of the connector started."""
    record = Registry(backend).get(name, scope)
    if record is None or record.generation != generation:
        raise ProducerFencedError(
            f"connector {name!r}: task {index} belongs to generation {generation}, but the newest generation "
            f"is {None if record is None else record.generation}: a newer plan or run fenced it")
    return record


def check_still_newest(backend: Backend, record: ConnectorRecord, label: str) -> None:
    """KIP-618 zombie fencing where commits cannot check the generation (Kafka): after ``init_transactions``,
    a task's generation must still be the newest, else it is a zombie and commits nothing.

    A newer generation first writes the registry, then initialises every transactional id of the older one
    (:func:`begin_generation`); a task first initialises its producer, then reads the registry (here). So either
    the newer generation's fencing came after this ``init_transactions`` (and this producer is fenced: its
    first commit raises), or the newer generation was in the registry before this read (seen here). Without
    this read, a task whose ``init_transactions`` came after the fencing (it passed its start-up check
    before the newer generation began, and was slow to start) would hold the newest epoch of its id, which a
    newer plan with fewer tasks never initialises again, and commit on beside it."""
    newest = Registry(backend).get(record.name, record.scope)
    if newest is None or newest.generation != record.generation:
        raise ProducerFencedError(
            f"{label} belongs to generation {record.generation}, but generation "
            f"{None if newest is None else newest.generation} started before its producer was initialised: "
            f"a newer plan or run fenced it; it commits nothing")


__all__ = ["begin_generation", "check_still_newest", "generation_guard", "join_generation", "transactional_id"]
