"""The ACL lists (connect_runtime.kafka_acls) and docs/kafka.md cannot drift: the page holds their rendering; the
names they fill are the runtime's own (transactional ids, groups, stores)."""

from __future__ import annotations

from pathlib import Path

import pytest

from connect_runtime.backends.base import RANGES_STORE, REGISTRY_STORE
from connect_runtime.backends.sqlite import SQLiteBackend
from connect_runtime.kafka_acls import ROLES, commands, markdown, role_acls
from connect_runtime.runtime.fencing import SINK_COMMITS_STORE, sink_fence_id, transactional_id

DOC = Path(__file__).resolve().parents[3] / "docs" / "kafka.md"


def test_docs_hold_the_generated_tables_and_commands() -> None:
    text = DOC.read_text()
    assert "## Access control (ACLs)" in text
    assert markdown() in text, "docs/kafka.md is out of date: paste `python -m connect_runtime.kafka_acls` between " \
                               "its generated markers"


def test_every_role_grants_only_known_operations_without_describe_beside_read_or_write() -> None:
    for role in ROLES.values():
        seen = set()
        for acl in role.acls:
            assert acl.resource_type in {"Topic", "Group", "TransactionalId", "Cluster"}, acl
            assert acl.operation in {"Read", "Write", "DescribeConfigs", "Describe", "Create", "IdempotentWrite"}, acl
            assert acl.pattern in {"literal", "prefixed"}, acl
            assert (acl.resource_type, acl.name, acl.operation) not in seen, f"{role.key}: {acl} twice"
            seen.add((acl.resource_type, acl.name, acl.operation))
        for kind, name, op in seen:  # Kafka implies Describe from Read and Write: listing it would prove nothing
            assert op != "Describe" or not {(kind, name, "Read"), (kind, name, "Write")} & seen


def test_the_filled_names_are_the_ones_the_runtime_uses() -> None:
    acls = role_acls("exactly_once_source", connector="orders", topic="t")
    prefixes = [a.name for a in acls if a.resource_type == "TransactionalId"]
    assert transactional_id("orders", "", 3, "connect-cluster").startswith(prefixes[-1])
    assert transactional_id("orders", "2024-01-01", 0, "connect-cluster").startswith(prefixes[-1])
    assert {a.name for a in acls if a.resource_type == "Topic"} == {"t", "connect-offsets", REGISTRY_STORE,
                                                                    RANGES_STORE}
    sink = role_acls("sink", connector="lake", topic="t", names={"cluster": "team-a"})
    fence = next(a for a in sink if a.resource_type == "TransactionalId" and "sink" in a.name)
    assert sink_fence_id("lake", "team-a").startswith(fence.name)
    assert sink_fence_id("lake", "team-a", 7).startswith(fence.name)
    assert ("Group", "connect-lake") in {(a.resource_type, a.name) for a in sink}
    assert ("Topic", SINK_COMMITS_STORE) in {(a.resource_type, a.name) for a in sink}
    assert SQLiteBackend.group_id_prefix == "connect-"


def test_commands_group_the_operations_of_one_resource() -> None:
    got = commands(role_acls("offsets_admin", connector="c", topic="t"), principal="User:ops", bootstrap="b:9093")
    assert got[0] == ('kafka-acls.sh --bootstrap-server "b:9093" --command-config admin.properties --add '
                      '--allow-principal "User:ops" --operation Read --operation DescribeConfigs --operation Write '
                      '--topic "pyconnect-connectors"')
    assert any("--transactional-id \"connect-cluster-pyconnect-connectors-\" --resource-pattern-type prefixed" in c
               for c in got)


def test_unknown_role() -> None:
    with pytest.raises(KeyError, match="unknown role 'nope'; roles: exactly_once_source"):
        role_acls("nope")
