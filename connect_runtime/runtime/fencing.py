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
  of the connector (same identity) started. A task rerun in a generation that had finished (Airflow's Clear on a
  mapped task instance of an older run) reopens it (``running`` again), so the next plan fences it as a running
  one: a finished fan-out generation is fenced once a newer plan begins.
- **A fenced run says by whom** (:func:`fenced_by_newer`): its ProducerFencedError names its generation and the
  newer one.
- **An exactly-once task checks after ``init_transactions``** (:func:`check_still_newest`) where commits cannot
  check the generation: the newer generation may have fenced the transactional ids before this task initialised
  its own.
- Transactional ids are ``<cluster>-<connector>[-<identity>]-<task>`` (:func:`transactional_id`).
- **A sink's group commits are fenced by its generation** (:class:`SinkCommitFence`): inside each commit where
  the backend can check it, else through one transactional producer per sink connector whose transaction
  carries every group commit (``Capabilities.group_offsets_in_transactions``, KIP-447) or precedes it.
- **A fanned-out sink task is fenced by its own tries too** (``SinkCommitFence(task=k)``): each try of task ``k``
  of a plan first takes the task's fence key, which fences the earlier try of the same task and no sibling:
  on SQLite the entry ``["<connector>", {"fanout_task": k}]`` of :data:`SINK_COMMITS_STORE` (its ``generation``
  counts the task's tries), checked inside each group commit beside the registry's generation guard; on Kafka
  the task's own commit-fence producer ``<cluster>-<connector>-sink-commits-<k>`` (:func:`sink_fence_id`),
  initialised before the group offsets are read, then the registry is read again (a newer plan fenced the
  generation's ids first, or is seen there). A newer plan or run fences every task of the older one: the
  registry guard (SQLite), or :func:`begin_generation` initialising each task's id (Kafka).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from connect_runtime.api.errors import (
    AuthorizationError,
    BackendUnavailableError,
    ConfigError,
    ProducerFencedError,
    WaitTimeoutError,
)
from connect_runtime.api.records import TopicPartition
from connect_runtime.backends.base import REGISTRY_STORE, Backend, Consumer, TransactionalProducer
from connect_runtime.backends.closing import CloseWhenIdle
from connect_runtime.runtime.errors import Stopped
from connect_runtime.runtime.registry import ConnectorRecord, Registry, owner, registry_key, task_worker
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
                     task_ids: Callable[[int], str] | None = None, fence_timeout: float = 30.0,
                     transactional: bool = True) -> Generation:
    """Register a new generation before any offset is read, and fence every task of the previous one.

    ``task_ids(index)``: the transactional id of a task (a source run's producers); given, and the backend's
    commits cannot check the generation, every id the previous generation used (its task count is in the
    registry) is initialised, as Kafka Connect fences the zombies of the previous generation; not when the previous
    generation held no transactional producer (an at-least-once source run: ``transactional=False``, recorded in
    its entry), so an at-least-once connector's principal needs no transactional id at all. A failure of that
    fencing is recorded as the new generation's end, then raised."""
    generation = Generation.begin(backend, name, kind=kind, scope=scope, connector_class=connector_class,
                                  offsets_store=offsets_store, floor=floor, secrets=secrets,
                                  transactional=transactional)
    previous = generation.previous
    # a sink's tasks have ids of their own only in a fan-out (their starts are in ``workers``); a sink run's
    # single commit fence is fenced by the newer run's own (SinkCommitFence.start)
    if (task_ids is not None and previous is not None and previous.tasks and previous.state != "stopped"
            and previous.transactional and (kind != "sink" or previous.workers)
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
    committed) when a newer plan or run of the connector started.

    A task of a generation that **finished** (every task of the plan done; e.g. Airflow's Clear on one mapped task
    instance of an older run) reopens it: the entry is ``running`` again, without this task among the done ones, so
    a newer plan or run fences the generation's transactional ids as it fences a running one (it skips a
    generation that stopped: its producers are gone), and offsets are not altered under it. The reopening is one
    atomic registry update that holds only while the generation is still the newest: after it, the task
    initialises its producer and checks the generation again (:func:`check_still_newest`), so a newer plan that
    begins at any instant either fences the producer or is seen there.

    Either way the task's start is recorded in the entry's ``workers`` (its host and Airflow try number:
    :func:`~connect_runtime.runtime.registry.task_worker`), in the same atomic update."""
    registry = Registry(backend)
    record = registry.get(name, scope)
    if record is not None and record.generation == generation and record.state == "stopped":
        now = int(time.time() * 1000)

        def reopen(have: ConnectorRecord) -> None:
            have.state, have.heartbeat, have.finished, have.owner = "running", now, None, owner()
            have.done_tasks = [i for i in have.done_tasks if i != index]
            task_worker(have, index)

        reopened = registry.modify(record, reopen)
        if reopened is not None:
            log.info("connector %s: task %d reruns in generation %d, which had finished: the generation runs again "
                     "(a newer plan fences it)", name, index, generation)
            return reopened
        record = registry.get(name, scope)
    if record is None or record.generation != generation:
        raise ProducerFencedError(
            f"connector {name!r}: task {index} belongs to generation {generation}, but the newest generation "
            f"is {None if record is None else record.generation}: a newer plan or run fenced it")
    joined = registry.modify(record, lambda have: task_worker(have, index))
    if joined is None:  # a newer generation began meanwhile: decide again (it raises)
        return join_generation(backend, name, scope, generation, index)
    return joined


def fenced_by_newer(backend: Backend, record: ConnectorRecord, exc: ProducerFencedError,
                    label: str) -> ProducerFencedError:
    """``exc`` (a commit refused: a newer instance fenced this one) as one error naming both generations, when the
    registry names a newer one; ``exc`` itself when it already names them or the registry cannot say."""
    if f"generation {record.generation}" in str(exc):
        return exc
    try:
        newest = Registry(backend).get(record.name, record.scope)
    except Exception as err:  # the original error stands; this read only adds to its text
        log.debug("connector %s: reading the registry to name the fencing generation failed: %r", record.name, err)
        return exc
    if newest is None or newest.generation == record.generation:
        return exc
    return ProducerFencedError(
        f"{label} belongs to generation {record.generation}, but generation {newest.generation} of the connector "
        f"began (started by {newest.owner}): it was fenced and commits nothing more ({exc})")


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


# -- the sink's commit fence -----------------------------------------------------------------------

SINK_COMMITS_STORE = "pyconnect-sink-commits"
"""Offset store the Kafka commit fence writes one entry per task into (see :class:`SinkCommitFence`); on SQLite
it holds the fence key of each fanned-out sink task (its tries)."""


def sink_fence_id(name: str, cluster_id: str | None, task: int | None = None) -> str:
    """The transactional id of a sink connector's commit fence (Kafka): ``<cluster>-<connector>-sink-commits`` for
    a run, ``...-sink-commits-<k>`` for task ``k`` of a fan-out plan (one prefix for an ACL)."""
    tid = f"{name}-sink-commits" if task is None else f"{name}-sink-commits-{task}"
    return f"{cluster_id}-{tid}" if cluster_id else tid


def sink_task_key(name: str, task: int) -> bytes:
    """The SQLite fence key of task ``task`` of a fanned-out sink connector (an entry of
    :data:`SINK_COMMITS_STORE`)."""
    return json.dumps([name, {"fanout_task": task}], separators=(",", ":"), sort_keys=True).encode()


class SinkCommitFence:
    """Fences the group-offset commits of older runs of a sink connector (zombie fencing by generation).

    On a backend whose consumer checks the generation inside each commit
    (``Capabilities.commits_check_generation``, SQLite) the consumers carry :attr:`guard`. Otherwise (Kafka) the
    run initialises one transactional producer (id ``<cluster>-<connector>-sink-commits``) before the group's
    offsets are read, which fences the one of every older run, and every group commit goes through a transaction
    of it, which also writes the task's entry ``["<connector>", {"task": i}]`` into the compacted store
    :data:`SINK_COMMITS_STORE` (its generation and the offsets committed: a record of which run committed what).
    A fence whose transaction failed in any way is replaced on the next try, after the registry confirms this run
    is still the newest generation.

    - **Atomic form** (``Capabilities.group_offsets_in_transactions``: Apache Kafka): the group offsets are sent to
      that transaction (KIP-447's ``send_offsets_to_transaction``, with the task consumer's group metadata: an
      explicitly assigned consumer is the group ``connect-<name>`` at generation -1 without a member id, which the
      group coordinator accepts for a group without members) and land with its commit, or never: once a newer run
      (a newer try of the task) initialised the fence id, the older producer's open transaction is aborted with
      its offsets and its commit fails fenced. A zombie commits no group offset after the newer run initialised.
    - **Two-step form** (the capability false: the Kafka backend with ``group.offsets.in.transactions=false``, for
      Tansu, which does not keep transactional group offsets): the transaction is committed first, then the group
      offsets through the consumer. It guarantees that a run whose fence transaction failed (fenced, or its outcome
      unknown) commits no group offset, and that each commit of a zombie after its first one after the newer run
      initialised fails fenced; it cannot fence the group commit itself, so a zombie that passed its transaction a
      moment before the newer run initialised still lands that one commit: the group's offsets of a partition the
      newer run owns move to the zombie's position, back (the next run delivers records again) or past what the newer
      run delivered (records only the zombie put; a sink keeping its offsets in its destination is fenced there).

    ``task``: task ``k`` of a fan-out plan (:mod:`connect_runtime.runtime.sink.fanout`): its commits are also
    fenced by the task's later tries, never by its siblings' (the module docstring: the task's fence key)."""

    def __init__(self, backend: Backend, name: str, generation: int, timeout_s: float,
                 task: int | None = None) -> None:
        self.backend = backend
        self.name = name
        self.generation = generation
        self.timeout_s = timeout_s
        self.task = task
        self.guard: tuple[str, bytes, int] | None = generation_guard(name, generation)
        self.task_guard: tuple[str, bytes, int] | None = None
        self.producer: TransactionalProducer | None = None
        self.try_start: dict[str, Any] | None = None
        """A fanned-out task's start as the registry's ``workers`` recorded it: a start of the same task after it
        is a newer try, which a replaced fence must not fence back (:meth:`check_newest`)."""
        self.fenced_backend = False  # group commits go through the commit fence (start)
        # one commit at a time; the producer is never closed under a commit (a task abandoned after TasksStuck)
        self._commits = CloseWhenIdle(self._close_producer)

    def begin(self) -> None:
        """Before the group's offsets are read: fence every older run's commits."""
        if self.backend.capabilities.commits_check_generation:
            if self.task is not None:
                self.task_guard = self._take_task_key()
            return  # the consumer checks the guard inside each commit
        self.guard = None
        self.start()
        if self.task is not None:
            self.check_newest()  # a newer plan fenced the generation's ids before this init: seen here

    def _take_task_key(self) -> tuple[str, bytes, int]:
        """SQLite: the next try of this fanned-out task (one atomic update): the earlier try's commits are refused
        from now on."""
        key = sink_task_key(self.name, int(self.task or 0))
        tries: list[int] = []

        def bump(current: bytes | None) -> bytes:
            tries.clear()
            try:
                before = int(json.loads(current or b"{}").get("generation", -1))
            except (ValueError, TypeError, AttributeError):
                before = -1
            tries.append(before + 1)
            return json.dumps({"generation": before + 1, "plan_generation": self.generation},
                              separators=(",", ":")).encode()

        self.backend.update_entry(SINK_COMMITS_STORE, key, bump, self.timeout_s)
        return (SINK_COMMITS_STORE, key, tries[-1])

    def arm(self, consumer: Consumer) -> None:
        """A task's consumer checks the generation (and a fanned-out task's try) inside each commit, where the
        backend can."""
        if self.guard is not None:
            consumer.generation_guard = self.guard
        if self.task_guard is not None:
            consumer.task_guard = self.task_guard

    def start(self) -> None:
        """A backend whose consumer cannot check the generation inside its commit (Kafka): initialise this
        run's commit-fence producer, which fences the one of every older run (before offsets are read)."""
        tid = sink_fence_id(self.name, self.backend.cluster_id, self.task)
        fence = self.backend.transactional_producer(tid, SINK_COMMITS_STORE)
        try:
            fence.init_transactions(self.timeout_s)
        except BaseException:  # the producer is not kept: close it whatever stopped the init, then re-raise
            fence.close()
            raise
        self.producer = fence
        self.fenced_backend = True

    def commit(self, task_id: int, offsets: Mapping[TopicPartition, int], consumer: Consumer | None = None) -> bool:
        """Commit this task's fence transaction (on a fenced backend). Returns whether the group offsets were
        committed in it (``consumer`` given, on a backend with ``group_offsets_in_transactions``); if not, the caller
        commits them through ``consumer`` after this returns."""
        if not self.fenced_backend:
            return False
        atomic = consumer is not None and self.backend.capabilities.group_offsets_in_transactions
        key = json.dumps([self.name, {"task": task_id}], separators=(",", ":")).encode()
        value = json.dumps({"generation": self.generation, "offsets": {
            f"{t}-{p}": o for (t, p), o in sorted(offsets.items())}}, separators=(",", ":")).encode()
        with self._commits.call():
            if self._commits.closing:
                raise Stopped(f"sink connector {self.name!r}: the run ended (its tasks were abandoned), so this task "
                              f"commits nothing more")
            if self.producer is None:  # the last one failed: a new one, if this run is still the newest
                self.check_newest()
                self.start()
                self.check_newest()
            fence = self.producer
            assert fence is not None
            try:
                fence.begin_transaction()
                if atomic:
                    assert consumer is not None
                    fence.send_group_offsets(consumer, offsets)
                fence.commit_transaction([], self.timeout_s, extra={SINK_COMMITS_STORE: [(key, value)]})
            except (ProducerFencedError, ConfigError, AuthorizationError):
                raise
            except Exception as exc:
                # its transaction is in an unknown or fatal state (a broker restart under it): the next try
                # starts a new fence (after reading the registry again)
                self._close_producer()
                if isinstance(exc, (BackendUnavailableError, WaitTimeoutError)):
                    raise
                raise BackendUnavailableError(
                    f"sink connector {self.name!r}: the commit fence's transaction failed ({type(exc).__name__}: "
                    f"{exc}); a new fence is started for the next try") from exc
        return atomic

    def check_newest(self) -> None:
        """Before a fence is (re)initialised: this run is still the newest generation, and a fanned-out task's try
        the newest try of its task (the registry's ``workers`` show no start of the task after this one's; its
        fence id is the task's, so a new fence of an older try would fence the newer try back)."""
        newest = Registry(self.backend).get(self.name)
        if newest is not None and newest.generation > self.generation:
            raise ProducerFencedError(
                f"sink connector {self.name!r}: generation {newest.generation} started while this run "
                f"(generation {self.generation}) could not reach the store: it is fenced and commits nothing more")
        if newest is None or self.task is None or self.try_start is None or newest.generation != self.generation:
            return
        starts = newest.workers
        if self.try_start in starts:  # recorded in order (one atomic registry update each)
            later = [w for w in starts[starts.index(self.try_start) + 1:] if w.get("task") == self.task]
        else:  # no longer among the last ATTEMPTS_KEPT starts of the plan's tasks: their clocks decide
            mine = int(self.try_start.get("started") or 0)
            later = [w for w in starts if w.get("task") == self.task and int(w.get("started") or 0) > mine]
        if later:
            newer = f" (on {later[-1].get('host')}, try {later[-1].get('try_number')})"
            raise ProducerFencedError(
                f"sink connector {self.name!r}: a newer try of task {self.task} started{newer} while this try's "
                f"commit fence failed: it is fenced and commits nothing more")

    def close(self) -> None:
        """At the run's end. Never under a commit in flight: destroying a Kafka client while another thread is
        inside a call on it is a use after free in librdkafka. A task still inside :meth:`commit` (abandoned after
        ``TasksStuck``) closes the producer itself when that commit returns, and commits nothing after it."""
        if not self._commits.close():
            log.warning("sink connector %r: a task is still committing through the commit fence; the fence is "
                        "closed when that commit returns", self.name)

    def _close_producer(self) -> None:
        fence, self.producer = self.producer, None
        if fence is not None:
            try:
                fence.close()
            except Exception as exc:
                log.warning("sink connector %r: closing the commit fence raised %r", self.name, exc)


__all__ = ["SINK_COMMITS_STORE", "SinkCommitFence", "begin_generation", "check_still_newest", "fenced_by_newer",
           "generation_guard", "join_generation", "sink_fence_id", "sink_task_key", "transactional_id"]
