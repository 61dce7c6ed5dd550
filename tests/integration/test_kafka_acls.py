"""Least privilege, proven (issue 34.2): each role's ACLs (:mod:`connect_runtime.kafka_acls`, the list docs/kafka.md
shows) on a broker with the StandardAuthorizer and ``allow.everyone.if.no.acl.found=false``
(:mod:`tests.support.kafka_secure`, SCRAM-SHA-512 over TLS; one broker for the module, unique names per role).

For each role, a principal of its own is granted exactly the role's ACLs for its names (connector, topic, group)
and runs the role: the first run completes (the case ``<role>-all``: the list is enough). Then, for each ACL of the
list (the parametrisation is the list itself, so the documentation and the test cannot drift), on the same
principal and scenario:

- taken away, the next run fails at once (before or at its first commit) with ONE
  :class:`~connect_runtime.api.errors.AuthorizationError` naming that ACL's resource type and name, its operation
  and the principal, and never the password;
- what earlier runs committed is all still there, and nothing of the failed run is visible (an at-least-once
  source may have written the records whose offsets it failed to commit: at least once);
- granted back, the run goes on and every record is there exactly once (at least once for the at-least-once
  source, whose contract it is).

An ACL the role does not need would leave its run green and fail its case. Every removal of every role runs by
default (CI included: about 2 minutes more than the sample); ``PYCONNECT_ACL_MATRIX=sample`` runs only the removals of
:data:`SAMPLED` for the roles listed there, for a quicker loop while working on one.
"""

from __future__ import annotations

import abc
import logging
import os
import re
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from connect_runtime.api.errors import AuthorizationError
from connect_runtime.api.records import TopicPartition
from connect_runtime.backends import open_backend
from connect_runtime.backends.base import RANGES_STORE, REGISTRY_STORE, Backend
from connect_runtime.kafka_acls import ROLES, Acl, role_acls
from connect_runtime.runtime.fencing import SINK_COMMITS_STORE
from tests.support.kafka_secure import WAIT_S, SecuredKafka

pytestmark = pytest.mark.kafka

RUN_S = 60.0
"""Bound on one run (each is a few records: a few seconds)."""


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


@pytest.fixture(scope="module")
def secured(kafka_secure: SecuredKafka) -> SecuredKafka:
    """The secured broker with the runtime's stores created by the admin (a platform team creates them once; a
    role's principal is not allowed Create)."""
    backend = open_backend(kafka_secure.url, _settings(kafka_secure.client_settings()))
    try:
        for store in (None, REGISTRY_STORE, RANGES_STORE, SINK_COMMITS_STORE):
            backend.offsets_topic(store)  # type: ignore[attr-defined]
    finally:
        backend.close()
    return kafka_secure


def _settings(settings: dict[str, str]) -> dict[str, str]:
    """Client settings as a backend takes them (the URL names the servers)."""
    out = {k: v for k, v in settings.items() if k != "bootstrap.servers"}
    out["connect.timeout.ms"] = "15000"
    return out


@dataclass
class Principal:
    """A SCRAM user of this case and its granted ACLs."""

    kafka: SecuredKafka
    user: str
    password: str
    settings: dict[str, str]

    @property
    def principal(self) -> str:
        return f"User:{self.user}"

    def grant(self, acls: list[Acl]) -> None:
        admin = self.kafka.admin()
        bindings = [self.kafka._binding(self.user, _snake(a.resource_type), a.name, _snake(a.operation), a.pattern,
                                        True, "*") for a in acls]
        for future in admin.create_acls(bindings).values():
            future.result(WAIT_S)
        deadline = time.monotonic() + WAIT_S
        while not set(bindings) <= set(self.kafka.acls(self.user)):
            assert time.monotonic() < deadline, f"ACLs of {self.user} not in the authorizer within {WAIT_S:g} s"
            time.sleep(0.1)

    def revoke(self, acl: Acl) -> None:
        self.kafka.revoke(self.user, _snake(acl.resource_type), acl.name, _snake(acl.operation), pattern=acl.pattern)


def _principal(kafka: SecuredKafka) -> Principal:
    """A SCRAM user of its own (no ACL yet)."""
    user = f"acl-{uuid.uuid4().hex[:10]}"
    password = kafka.add_user(user)
    return Principal(kafka, user, password, _settings(kafka.sasl_settings(user)))


def _admin_backend(kafka: SecuredKafka) -> Backend:
    return open_backend(kafka.url, _settings(kafka.client_settings()))


def _topic_values(kafka: SecuredKafka, topic: str) -> list[str]:
    """Every committed value of ``topic`` (partition 0), read_committed, as the admin."""
    backend = _admin_backend(kafka)
    try:
        tp = TopicPartition(topic, 0)
        consumer = backend.consumer(None)
        try:
            end = consumer.end_offsets([tp], 30.0)[tp]
        finally:
            consumer.close()
        values: list[str] = []
        for _offsets, _keys, vals, _ts, _hs in backend.read_range_batches(tp, 0, end, keys=False, timestamps=False,
                                                                          headers=False):
            values += [(v or b"").decode() for v in vals]
        return values
    finally:
        backend.close()


def _produce(kafka: SecuredKafka, topic: str, values: list[str]) -> None:
    backend = _admin_backend(kafka)
    try:
        backend.create_topics({topic: 1})
        producer = backend.producer()
        try:
            producer.send([(topic, 0, None, v.encode(), None, None) for v in values])
            producer.flush(30.0)
        finally:
            producer.close()
    finally:
        backend.close()


# -- the roles, each as: names, a first run, more input, the run again, what must hold ----------------------------


class Scenario(abc.ABC):
    """One role's runs for one case. ``run()`` runs the role once as the principal; ``more()`` adds input;
    ``check(runs_done)`` asserts what is committed after the first run (1) and after the rerun (2)."""

    exactly = True

    def __init__(self, kafka: SecuredKafka, tmp: Path, tag: str) -> None:
        self.kafka = kafka
        self.tmp = tmp
        self.connector = f"acl-{tag}"
        self.topic = f"acl-{tag}"

    def names(self) -> dict[str, str]:
        return {}

    def acls(self, role: str) -> list[Acl]:
        return role_acls(role, connector=self.connector, topic=self.topic, names=self.names())

    def prepare(self) -> None:
        """Created by the admin: the data topic."""
        _produce(self.kafka, self.topic, [])

    @abc.abstractmethod
    def run(self, settings: dict[str, str]) -> None:
        """See the class docstring."""

    @abc.abstractmethod
    def more(self) -> None:
        """See the class docstring."""

    @abc.abstractmethod
    def committed(self) -> list[str]:
        """See the class docstring."""

    def check(self, rounds: int, failed: bool = False) -> None:
        """After ``rounds`` runs that completed (and, ``failed``, one more that failed): exactly once, every record
        of those rounds once and nothing of the failed run; at least once, every record of those rounds at least
        once (the failed run may have written records before it failed to commit their offsets)."""
        want = [f"line {i}" for i in range(5 * rounds)]
        got = self.committed()
        if self.exactly:
            assert sorted(got) == sorted(want), f"{self.connector}: committed {got}, want each of {want} once"
        elif failed:
            assert set(want) <= set(got) <= set(want) | {f"line {5 * rounds + i}" for i in range(5)}, (
                f"{self.connector}: committed {got}, want each of {want} at least once, and no other but the failed "
                f"run's")
        else:
            assert set(got) == set(want), f"{self.connector}: committed {got}, want each of {want} at least once"


class SourceScenario(Scenario):
    exactly_once = True

    def prepare(self) -> None:
        super().prepare()
        self.dir = self.tmp / "in"
        self.dir.mkdir()
        self.more()

    def more(self) -> None:
        n = len(list(self.dir.iterdir()))
        (self.dir / f"{n}.txt").write_text("".join(f"line {5 * n + i}\n" for i in range(5)))

    def config(self) -> dict[str, Any]:
        return {"name": self.connector, "connector.class": "connect_runtime.connectors.files.DirectorySource",
                "directory": str(self.dir), "topic": self.topic, "format": "text", "file.final.ms": "0",
                "value.converter": "connect_runtime.converters.StringConverter", "poll.idle.timeout.ms": "100"}

    def run(self, settings: dict[str, str]) -> None:
        from connect_runtime.runtime.source.run import run_source

        run_source(self.config(), self.kafka.url, backend_settings=settings, max_seconds=RUN_S,
                   exactly_once=self.exactly_once, ledger_key={"interval": self.connector})

    def committed(self) -> list[str]:
        return _topic_values(self.kafka, self.topic)


class AtLeastOnceScenario(SourceScenario):
    exactly_once = False
    exactly = False


class SinkScenario(Scenario):
    """A FileSink (exactly once by its destination) reading the data topic."""

    def prepare(self) -> None:
        self.out = self.tmp / "out"
        self.rounds = 0
        self.more()

    def more(self) -> None:
        _produce(self.kafka, self.topic, [f"line {5 * self.rounds + i}" for i in range(5)])
        self.rounds += 1

    def config(self) -> dict[str, Any]:
        return {"name": self.connector, "connector.class": "connect_runtime.connectors.files.FileSink",
                "directory": str(self.out), "topics": self.topic, "format": "text",
                "value.converter": "connect_runtime.converters.StringConverter"}

    def run(self, settings: dict[str, str]) -> None:
        from connect_runtime.runtime.sink.run import run_sink

        run_sink(self.config(), self.kafka.url, backend_settings=settings, max_seconds=RUN_S)

    def committed(self) -> list[str]:
        lines: list[str] = []
        for path in sorted(self.out.rglob("*.txt")):
            if not path.name.startswith("."):
                lines += path.read_text().splitlines()
        return lines


class FanOutSinkScenario(SinkScenario):
    """The sink role fanned out: plan_sink, then each task as its own run (as mapped task instances do)."""

    def run(self, settings: dict[str, str]) -> None:
        from connect_runtime.runtime.sink.fanout import plan_sink, run_sink_task

        plan = plan_sink(self.config(), self.kafka.url, backend_settings=settings)
        for task in plan["tasks"]:
            run_sink_task(self.config(), self.kafka.url, plan, task["index"], backend_settings=settings,
                          max_seconds=RUN_S)


class OffsetsAdminScenario(Scenario):
    """``pyconnect offsets get`` then ``set`` on a source connector (the admin API the CLI and the view call): the
    admin ran the source once; each round the principal shows the offsets and sets one to a new value."""

    def prepare(self) -> None:
        self.source = SourceScenario(self.kafka, self.tmp, self.connector.removeprefix("acl-"))
        self.source.prepare()
        self.source.run(_settings(self.kafka.client_settings()))
        self.values: list[str] = []

    def run(self, settings: dict[str, str]) -> None:
        from connect_runtime import admin

        backend = open_backend(self.kafka.url, settings)
        try:
            shown = admin.get_offsets(backend, self.connector)["offsets"]
            assert shown, f"{self.connector}: no offsets shown"
            value = f"line {len(self.values)}"
            admin.alter_offsets(backend, self.connector,
                                [{"partition": shown[0]["partition"], "offset": {"acl_test": value}}])
            self.values.append(value)
        finally:
            backend.close()

    def more(self) -> None:
        pass

    def committed(self) -> list[str]:
        from connect_runtime import admin

        backend = _admin_backend(self.kafka)
        try:
            shown = admin.get_offsets(backend, self.connector)["offsets"]
        finally:
            backend.close()
        return [e["offset"]["acl_test"] for e in shown if "acl_test" in e["offset"]]

    def check(self, rounds: int, failed: bool = False) -> None:
        got = self.committed()
        assert got == self.values[-1:], f"{self.connector}: the offsets show {got}, want {self.values[-1:]}"
        assert len(self.values) == rounds


class WatcherScenario(Scenario):
    """The AssetWatcher trigger's blocking half (``_Watch``) through a ``pyconnect`` connection of the principal:
    each round fires the range committed since the last one and commits its end (as ``advance`` does)."""

    def names(self) -> dict[str, str]:
        return {"watcher_group": f"airflow-watch-{self.topic}"}

    def prepare(self) -> None:
        self.rounds = 0
        self.fired: list[list[int]] = []
        self.more()

    def more(self) -> None:
        _produce(self.kafka, self.topic, [f"line {5 * self.rounds + i}" for i in range(5)])
        self.rounds += 1

    def run(self, settings: dict[str, str]) -> None:
        import json
        import os

        from airflow_pyconnect.triggers.committed import _Watch

        conn_id = f"pc_{self.connector.replace('-', '_')}"
        env = f"AIRFLOW_CONN_{conn_id.upper()}"
        os.environ[env] = json.dumps({"conn_type": "pyconnect", "host": self.kafka.url, "extra": settings})
        watch = _Watch(conn_id, [self.topic], f"airflow-watch-{self.topic}", "beginning")
        try:
            polled = watch.poll({})
            if polled is not None:
                watch.commit(polled.tos)
                self.fired.append(polled.payload["ranges"][self.topic]["0"])
        finally:
            watch.close()
            os.environ.pop(env, None)

    def committed(self) -> list[str]:
        return [f"line {i}" for lo, hi in self.fired for i in range(lo, hi)]


SCENARIOS: dict[str, tuple[str, Callable[[SecuredKafka, Path, str], Scenario]]] = {
    "exactly_once_source": ("exactly_once_source", SourceScenario),
    "at_least_once_source": ("at_least_once_source", AtLeastOnceScenario),
    "sink": ("sink", SinkScenario),
    "fan_out_sink": ("sink", FanOutSinkScenario),
    "offsets_admin": ("offsets_admin", OffsetsAdminScenario),
    "watcher": ("watcher", WatcherScenario),
}
"""Each case: the role whose ACLs it grants and the scenario that runs it."""

SAMPLED: dict[str, set[tuple[str, str, str]]] = {
    "at_least_once_source": {("Topic", "{topic}", "Write"), ("Topic", "{offsets}", "Write"),
                             ("Topic", RANGES_STORE, "Write")},
    "fan_out_sink": {("TransactionalId", "{cluster}-{connector}-sink-commits", "Write")},
    "offsets_admin": {("Topic", "{offsets}", "Write"), ("Topic", "{offsets}", "Read"),
                      ("TransactionalId", "{cluster}-pyconnect-connectors-", "Write")},
}
"""With ``PYCONNECT_ACL_MATRIX=sample``, the removals run for these roles: those that take another path than the
roles always proven in full (the exactly-once source, the sink and the watcher): the at-least-once source's plain
producer; the fan-out's per-task commit fences; the admin's writes outside any run. Without it, every removal runs."""

FULL = os.environ.get("PYCONNECT_ACL_MATRIX", "full") != "sample"


def _cases() -> Iterator[Any]:
    for case, (role, _) in SCENARIOS.items():
        yield pytest.param(case, None, id=f"{case}-all")
        for i, acl in enumerate(ROLES[role].acls):
            sampled = case not in SAMPLED or (acl.resource_type, acl.name, acl.operation) in SAMPLED[case]
            yield pytest.param(case, i, id=f"{case}-without-{acl.operation}-{acl.resource_type}-{acl.name}",
                               marks=() if sampled or FULL else (pytest.mark.skip(
                                   reason="outside the sample PYCONNECT_ACL_MATRIX=sample runs"),))


@dataclass
class _RoleState:
    """A role's principal and scenario after its first run, shared by the role's cases (each leaves every ACL
    granted again and one more round committed)."""

    principal: Principal
    scenario: Scenario
    acls: list[Acl]
    rounds: int = 1


class _Roles:
    def __init__(self, kafka: SecuredKafka, tmp: pytest.TempPathFactory) -> None:
        self.kafka, self.tmp = kafka, tmp
        self.states: dict[str, _RoleState] = {}

    def get(self, case: str) -> _RoleState:
        """The role's state: on first use a principal granted exactly the role's ACLs, whose first run completed."""
        state = self.states.get(case)
        if state is None:
            role, make = SCENARIOS[case]
            scenario = make(self.kafka, self.tmp.mktemp(case), uuid.uuid4().hex[:10])
            principal = _principal(self.kafka)
            acls = scenario.acls(role)
            principal.grant(acls)
            scenario.prepare()
            scenario.run(principal.settings)
            scenario.check(1)
            state = self.states[case] = _RoleState(principal, scenario, acls)
        return state


@pytest.fixture(scope="module")
def roles(secured: SecuredKafka, tmp_path_factory: pytest.TempPathFactory) -> _Roles:
    return _Roles(secured, tmp_path_factory)


@pytest.mark.parametrize(("case", "removed"), list(_cases()))
def test_role_runs_with_exactly_its_acls(roles: _Roles, case: str, removed: int | None) -> None:
    try:
        state = roles.get(case)  # the role's first run, with exactly its ACLs, completed
        if removed is not None:
            _without(state, state.acls[removed], case)
    except BaseException:  # a case that failed half-way leaves the role's state unknown: the next case starts afresh
        roles.states.pop(case, None)
        raise


def _without(state: _RoleState, missing: Acl, case: str) -> None:
    """``missing`` taken away: the next run fails at once naming it, nothing committed is lost; granted back, the
    run goes on exactly once."""
    principal, scenario = state.principal, state.scenario
    principal.revoke(missing)
    scenario.more()
    started = time.monotonic()
    with pytest.raises(AuthorizationError) as refused:
        scenario.run(principal.settings)
    took = time.monotonic() - started
    err = refused.value
    text = str(err)
    assert (err.resource_type, err.resource_name, err.pattern_type) == (
        missing.resource_type, missing.name, missing.pattern), text
    assert missing.operation in text and principal.principal in text, text
    assert "kafka-acls.sh" in err.command and principal.password not in text, text
    print(f"\n{case} without {missing.operation} on {missing.resource_type} {missing.name}: failed in {took:.1f} s")
    scenario.check(state.rounds, failed=True)  # what earlier runs committed is there (exactly once: only that)
    principal.grant([missing])
    scenario.run(principal.settings)
    state.rounds += 1
    scenario.check(state.rounds)


def test_showing_offsets_needs_only_reads(secured: SecuredKafka, tmp_path: Path,
                                          caplog: pytest.LogCaptureFixture) -> None:
    """``pyconnect offsets get`` and the Connectors view's offsets (the admin API's ``get_offsets``) with only the
    offsets admin's Read and DescribeConfigs ACLs: no Write anywhere, so no idempotent producer id either."""
    from connect_runtime import admin

    source = SourceScenario(secured, tmp_path, uuid.uuid4().hex[:10])
    source.prepare()
    source.run(_settings(secured.client_settings()))
    viewer = _principal(secured)
    viewer.grant([a for a in role_acls("offsets_admin", connector=source.connector)
                  if a.resource_type == "Topic" and a.operation in ("Read", "DescribeConfigs")])
    backend = open_backend(secured.url, viewer.settings)
    try:
        shown = admin.get_offsets(backend, source.connector)["offsets"]
    finally:
        backend.close()
    assert [e["offset"] for e in shown] and all(e["offset"] for e in shown), shown
    loud = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert not loud, f"showing offsets logged errors: {loud}"
