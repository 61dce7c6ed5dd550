"""The Kafka ACLs each role of the project needs: the one list docs/kafka.md ("Access control (ACLs)") shows and
``tests/integration/test_kafka_acls.py`` proves, ACL by ACL, on a broker with an authorizer (every ACL granted, the
role runs to completion; any one of them taken away, it fails at once with one
:class:`~connect_runtime.api.errors.AuthorizationError` naming it).

Names are templates filled by :func:`role_acls`: ``{topic}`` (the data topic), ``{connector}``, ``{cluster}`` (the
backend's ``cluster.id``, the prefix of every transactional id, ``connect-cluster`` by default), ``{offsets}`` (the
offsets topic, ``offset.storage.topic`` or the connector's ``offsets.storage.topic``, ``connect-offsets`` by
default), ``{group}`` (a sink's group, ``<group.id.prefix><connector>``, ``connect-<connector>`` by default) and
``{watcher_group}`` (an AssetWatcher trigger's ``watcher_group``, ``airflow-watch-<topics>`` by default).

Kafka implies ``Describe`` from ``Read``, ``Write``, ``Delete`` and ``Alter``, so no role lists it beside one of
them. Topics are assumed to exist (created once by an administrator, or by a first run whose principal may
``Create`` them: see docs/kafka.md); a topic the principal may not see looks missing, and the run then tries to
create it and is refused, naming the operation it needs.

``python -m connect_runtime.kafka_acls`` prints the per-role part of docs/kafka.md's section, names as shell
variables (:data:`SHELL_NAMES`); ``tests/unit/connect_runtime/test_kafka_acl_roles.py`` checks that the page holds it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from connect_runtime.backends.base import RANGES_STORE, REGISTRY_STORE
from connect_runtime.runtime.fencing import SINK_COMMITS_STORE

DEFAULT_NAMES = {"cluster": "connect-cluster", "offsets": "connect-offsets", "group": "connect-{connector}",
                 "watcher_group": "airflow-watch-{topic}"}
"""The names the runtime uses when no setting says otherwise (``{connector}``/``{topic}`` filled in after)."""

_OPTION = {"Topic": "--topic", "Group": "--group", "TransactionalId": "--transactional-id", "Cluster": "--cluster"}


@dataclass(frozen=True)
class Acl:
    """One ACL: ``operation`` on ``resource_type`` ``name`` (a literal name, or with ``pattern`` ``prefixed`` every
    name that starts with it), and why the role needs it."""

    resource_type: str
    name: str
    operation: str
    why: str
    pattern: str = "literal"

    def filled(self, names: Mapping[str, str]) -> Acl:
        """This ACL with ``{placeholders}`` of its name filled from ``names``."""
        name = self.name
        for _ in range(3):  # a default may hold another placeholder ({group} -> connect-{connector})
            name = name.format_map(_Keep(names))
        return replace(self, name=name)


class _Keep(dict[str, str]):
    """``format_map`` mapping that leaves an unknown placeholder as it is."""

    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


@dataclass(frozen=True)
class Role:
    """A role (a kind of principal: what one Airflow connection does) and the ACLs it needs, in the order a run
    first needs them."""

    key: str
    title: str
    doc: str
    acls: tuple[Acl, ...]


REGISTRY: tuple[Acl, ...] = (
    Acl("Topic", REGISTRY_STORE, "Read", "read the registry of generations (who runs the connector, which generation)"),
    Acl("Topic", REGISTRY_STORE, "DescribeConfigs", "check that the registry's topic is compacted"),
    Acl("Topic", REGISTRY_STORE, "Write", "register this run's generation, its heartbeat and its end"),
    Acl("TransactionalId", f"{{cluster}}-{REGISTRY_STORE}-", "Write",
        "the writer of a registry entry (a compare-and-set: claims the entry, fencing an older writer)", "prefixed"),
)
"""What every run and every offset change needs: the registry of generations (``pyconnect-connectors``)."""

_SOURCE: tuple[Acl, ...] = (
    Acl("Topic", "{offsets}", "Read", "read the source offsets the run starts from"),
    Acl("Topic", "{offsets}", "DescribeConfigs", "check that the offsets topic is compacted"),
    Acl("Topic", RANGES_STORE, "Read", "read what the data interval (the ledger key) already holds"),
    Acl("Topic", RANGES_STORE, "DescribeConfigs", "check that the ranges topic is compacted"),
    Acl("Topic", "{topic}", "Write", "write the records (Describe, implied: its partitions)"),
    Acl("Topic", "{offsets}", "Write", "commit the source offsets with the records"),
    Acl("Topic", RANGES_STORE, "Write", "record the committed ranges of the data interval with the records"),
)

ROLES: dict[str, Role] = {role.key: role for role in (
    Role("exactly_once_source", "Exactly-once source run",
         "`PyConnectSourceOperator`, `pyconnect run` of a source, a fan-out source task: records, offsets and ranges "
         "in one transaction per commit (KIP-618).",
         (*REGISTRY, *_SOURCE,
          Acl("TransactionalId", "{cluster}-{connector}-", "Write",
              "the tasks' transactional producers `<cluster>-<connector>[-<identity>]-<task>`, and fencing the "
              "previous generation's", "prefixed"))),
    Role("at_least_once_source", "At-least-once source run",
         "`exactly_once=False`: records first, then offsets and ranges (a failure in between sends records again).",
         (*REGISTRY, *_SOURCE)),
    Role("sink", "Sink run",
         "`PyConnectSinkOperator`, `pyconnect run` of a sink, a fan-out sink task (`plan_sink`, `run_sink_task`): "
         "the same ACLs, the fan-out's commit fences being `<cluster>-<connector>-sink-commits-<task>`.",
         (*REGISTRY,
          Acl("TransactionalId", f"{{cluster}}-{{connector}}-{SINK_COMMITS_STORE.removeprefix('pyconnect-')}", "Write",
              "the commit fence: fences the group commits of an older run (a fan-out task: `...-<task>`)",
              "prefixed"),
          Acl("Topic", SINK_COMMITS_STORE, "DescribeConfigs", "check that the commit fence's topic is compacted"),
          Acl("Group", "{group}", "Read", "read the committed offsets (Describe, implied) and commit them"),
          Acl("Topic", "{topic}", "Read", "read the records (Describe, implied: partitions and ends)"),
          Acl("Topic", SINK_COMMITS_STORE, "Write", "the commit fence's transaction before each group commit"))),
    Role("offsets_admin", "Offsets admin (`pyconnect offsets`, the Connectors view)",
         "`pyconnect offsets get|set|reset` and the Airflow Connectors view's offsets: read the registry and the "
         "offsets; `set` and `reset` refuse while a run holds the connector, start a new generation (fencing every "
         "older run, KIP-875) and write the offsets. A principal that only shows (`get`, the view) needs the "
         "registry's Read and DescribeConfigs and the offsets topic's Read and DescribeConfigs; a sink's "
         "offsets need Describe (`get`) or Read (`set`) on its group and Describe on its topics.",
         (*REGISTRY,
          Acl("Topic", "{offsets}", "Read", "show a source's offsets"),
          Acl("Topic", "{offsets}", "DescribeConfigs", "check that the offsets topic is compacted"),
          Acl("Topic", "{offsets}", "Write", "set or reset a source's offsets"))),
    Role("watcher", "AssetWatcher trigger and deferrable sensor",
         "`CommittedRecordsTrigger` (its position in `watcher_group`) and the committed-offsets sensor on a "
         "sink's group.",
         (Acl("Topic", "{topic}", "Read", "find the end of what is committed (read_committed)"),
          Acl("Group", "{watcher_group}", "Read", "read and commit the watcher's position"))),
    Role("spark", "Spark's reads (`spark_kafka`)",
         "Spark's own Kafka source over a committed range: `assign` with starting and ending offsets, "
         "read_committed; it neither joins nor commits to its group (`pyconnect-spark-<hash>`, or `kafka.group.id` "
         "/ `groupIdPrefix`).",
         (Acl("Topic", "{topic}", "Read", "read the range (Describe, implied: offsets and partitions)"),)),
)}


def role_acls(role: str, *, connector: str = "{connector}", topic: str = "{topic}",
              names: Mapping[str, str] | None = None) -> list[Acl]:
    """The ACLs of ``role`` (a key of :data:`ROLES`) with their names filled: ``connector``, ``topic`` and, in
    ``names``, any of :data:`DEFAULT_NAMES` a setting changes (``cluster``, ``offsets``, ``group``,
    ``watcher_group``)."""
    if role not in ROLES:
        raise KeyError(f"unknown role {role!r}; roles: {', '.join(ROLES)}")
    filled = {**DEFAULT_NAMES, **(names or {}), "connector": connector, "topic": topic}
    return [acl.filled(filled) for acl in ROLES[role].acls]


SHELL_NAMES = {"cluster": "${CLUSTER}", "connector": "${CONNECTOR}", "topic": "${TOPIC}", "offsets": "${OFFSETS}",
               "group": "${GROUP_PREFIX}${CONNECTOR}", "watcher_group": "${WATCHER_GROUP}"}
"""The names as the shell variables the documented commands use."""


def commands(acls: Sequence[Acl], principal: str = "${PRINCIPAL}", bootstrap: str = "${BOOTSTRAP}") -> list[str]:
    """``kafka-acls.sh`` commands granting ``acls``: one per resource (its operations together)."""
    grouped: dict[tuple[str, str, str], list[str]] = {}
    for acl in acls:
        grouped.setdefault((acl.resource_type, acl.name, acl.pattern), []).append(acl.operation)
    out = []
    for (kind, name, pattern), operations in grouped.items():
        resource = "--cluster" if kind == "Cluster" else f'{_OPTION[kind]} "{name}"'
        prefixed = " --resource-pattern-type prefixed" if pattern == "prefixed" else ""
        ops = " ".join(f"--operation {op}" for op in operations)
        out.append(f'kafka-acls.sh --bootstrap-server "{bootstrap}" --command-config admin.properties --add '
                   f'--allow-principal "{principal}" {ops} {resource}{prefixed}')
    return out


def markdown(roles: Sequence[str] | None = None) -> str:
    """The tables and commands of docs/kafka.md's "Access control (ACLs)" section, one sub-section per role, names
    as the shell variables of :data:`SHELL_NAMES`."""
    out: list[str] = []
    for key in roles or list(ROLES):
        role = ROLES[key]
        acls = [acl.filled(SHELL_NAMES) for acl in role.acls]
        out += [f"### {role.title}", "", role.doc, "",
                "| Resource | Name | Pattern | Operation | Why |", "|---|---|---|---|---|"]
        out += [f"| {a.resource_type} | `{a.name}` | {a.pattern} | {a.operation} | {a.why} |" for a in acls]
        out += ["", "```sh", *commands(acls), "```", ""]
    return "\n".join(out)


__all__ = ["DEFAULT_NAMES", "REGISTRY", "ROLES", "SHELL_NAMES", "Acl", "Role", "commands", "markdown", "role_acls"]

if __name__ == "__main__":  # pragma: no cover - prints the docs section
    print(markdown())
