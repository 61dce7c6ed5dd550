"""OpenLineage datasets and facets of the connector tasks (airflow_pyconnect.lineage, docs/lineage.md): the naming
of every connector kind, and the statistics and ranges of real runs on SQLite (a source, its rerun that moves
nothing, a SqlSink whose table columns the database gives). The whole path under ``airflow dags test`` is
tests/integration/test_example_pipeline.py; the provider absent is tests/integration/test_lineage_optional.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from openlineage.client.serde import Serde

from airflow_pyconnect.assets import convert_asset_to_openlineage
from airflow_pyconnect.lineage import operator_lineage
from airflow_pyconnect.lineage.datasets import (
    Dataset,
    backend_namespace,
    external_datasets,
    sql_table_dataset,
    url_dataset,
)
from connect_runtime import run_sink, run_source
from connect_runtime.api.records import TopicPartition
from connect_runtime.backends import open_backend


def test_backend_namespaces_follow_the_naming_spec() -> None:
    assert backend_namespace("kafka://b1:9093,b2:9092") == "kafka://b1:9093"  # the first bootstrap server
    assert backend_namespace("kafka://broker") == "kafka://broker:9092"
    assert backend_namespace("kafka://user:secret@b1:9094") == "kafka://b1:9094"  # no credentials in a name
    assert backend_namespace("sqlite:////var/p/pyconnect.db") == "pyconnect+sqlite:///var/p/pyconnect.db"
    with pytest.raises(ValueError, match="'redis'"):
        backend_namespace("redis://x")


def test_paths_urls_and_tables() -> None:
    assert url_dataset("/data/lake/topics/orders") == Dataset("file", "/data/lake/topics/orders")
    assert url_dataset("file:///data/x") == Dataset("file", "/data/x")
    assert url_dataset("s3://bucket/lake/topics/orders") == Dataset("s3://bucket", "lake/topics/orders")
    assert url_dataset("gs://b/p") == Dataset("gs://b", "/p")
    pg = "postgresql+psycopg://u:pw@db.example:6543/shop"
    assert sql_table_dataset(pg, "orders") == Dataset("postgres://db.example:6543", "shop.public.orders")
    assert sql_table_dataset(pg, "sales.orders") == Dataset("postgres://db.example:6543", "shop.sales.orders")
    assert sql_table_dataset("postgresql://h/d", "t").namespace == "postgres://h:5432"
    assert sql_table_dataset("sqlite:////tmp/s.db", "t") == Dataset("sqlite:///tmp/s.db", "t")


def test_each_connector_kind_names_its_external_side() -> None:
    files = "connect_runtime.connectors.files."
    assert external_datasets({"connector.class": files + "DirectorySource", "directory": "/in"}, ["t"]) == [
        Dataset("file", "/in")]
    assert external_datasets({"connector.class": files + "FileSink", "directory": "/out/"}, ["b", "a"]) == [
        Dataset("file", "/out/a", "a"), Dataset("file", "/out/b", "b")]
    lake = external_datasets({"connector.class": "connect_runtime.connectors.lake.ParquetSink",
                              "path": "s3://lake/root", "topics.dir": "t", "parquet.schema": '{"id": "int64"}'},
                             ["orders"])
    assert lake == [Dataset("s3://lake", "root/t/orders", "orders", (("id", "int64"),))]
    sql = "connect_runtime.connectors.sql."
    pg = "postgresql+psycopg://h:5432/shop"
    assert external_datasets({"connector.class": sql + "SqlSource", "connection.url": pg, "topic.prefix": "pg-"},
                             ["pg-orders", "pg-users"]) == [
        Dataset("postgres://h:5432", "shop.public.orders", "pg-orders"),
        Dataset("postgres://h:5432", "shop.public.users", "pg-users")]
    assert external_datasets({"connector.class": sql + "SqlSource", "connection.url": pg,
                              "table.include.list": "s.orders"}, ["orders"]) == [
        Dataset("postgres://h:5432", "shop.s.orders", "orders")]
    assert external_datasets({"connector.class": sql + "SqlSource", "connection.url": pg, "query": "SELECT 1"},
                             ["q"]) == []
    assert external_datasets({"connector.class": sql + "SqlSink", "connection.url": pg,
                              "table.name.format": "raw_${topic}"}, ["orders"]) == [
        Dataset("postgres://h:5432", "shop.public.raw_orders", "orders")]
    assert external_datasets({"connector.class": "connect_runtime.connectors.datagen.DataGenSource"}, ["t"]) == []
    assert external_datasets({"connector.class": "my.own.Connector"}, ["t"]) == []


def test_the_cdc_source_names_the_tables_it_captures() -> None:
    """PostgresCdcSource: the tables of table.include.list (public unless named), each with its Debezium topic
    <prefix>.<schema>.<table>; with an empty list (every table of the publication) those whose topics it wrote; no
    credentials in a name."""
    cdc = {"connector.class": "connect_runtime.connectors.cdc.PostgresCdcSource", "topic.prefix": "shop",
           "connection.url": "postgresql://cdc:secret@db.example:6543/sales"}
    assert external_datasets({**cdc, "table.include.list": "orders, inv.items"}, []) == [
        Dataset("postgres://db.example:6543", "sales.inv.items", "shop.inv.items"),
        Dataset("postgres://db.example:6543", "sales.public.orders", "shop.public.orders")]
    assert external_datasets({**cdc, "table.include.list": ["public.orders"]}, ["shop.public.orders"]) == [
        Dataset("postgres://db.example:6543", "sales.public.orders", "shop.public.orders")]
    assert external_datasets({**cdc, "table.include.list": ""}, ["shop.public.b", "shop.s.a", "other", "shop.x"]) == [
        Dataset("postgres://db.example:6543", "sales.public.b", "shop.public.b"),
        Dataset("postgres://db.example:6543", "sales.s.a", "shop.s.a")]
    assert external_datasets({**cdc, "connection.url": "postgresql+psycopg://h/d", "table.include.list": "t"}, []) == [
        Dataset("postgres://h:5432", "d.public.t", "shop.public.t")]
    assert external_datasets({**cdc, "topic.prefix": ""}, ["x"]) == []


def _json(obj: Any) -> Any:
    return json.loads(Serde.to_json(obj))


def _write_orders(folder: Path, n: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "a.jsonl").write_text("".join(json.dumps({"id": i, "who": f"c{i % 3}"}) + "\n" for i in range(n)))


def _stored_bytes(url: str, topic: str, end: int) -> int:
    with open_backend(url) as be:
        return sum(len(r.key or b"") + len(r.value or b"") for r in be.read_range(TopicPartition(topic, 0), 0, end))


def test_a_source_reports_what_it_committed_and_its_rerun_zero(tmp_path: Path, sqlite_url: str) -> None:
    _write_orders(tmp_path / "in", 7)
    config = {"name": "files", "connector.class": "connect_runtime.connectors.files.DirectorySource",
              "directory": str(tmp_path / "in"), "topic": "orders", "directory.scan.interval.ms": "0"}
    key = {"dag_id": "d", "task_id": "t", "map_index": -1, "interval": "i"}
    first = run_source(config, sqlite_url, ledger_key=key).to_dict()
    lineage = operator_lineage("source", config, sqlite_url, first)
    assert [(d.namespace, d.name) for d in lineage.inputs] == [("file", str(tmp_path / "in"))]
    (out,) = [_json(d) for d in lineage.outputs]
    store = sqlite_url.split(":///", 1)[1]
    assert (out["namespace"], out["name"]) == (f"pyconnect+sqlite://{store}", "orders")
    stats = out["outputFacets"]["outputStatistics"]
    assert stats["rowCount"] == first["records"] == 7
    assert stats["size"] == first["bytes"] == _stored_bytes(sqlite_url, "orders", 7)
    facet = _json(lineage.run_facets["pyconnectRanges"])
    assert facet["_schemaURL"].endswith("PyConnectRangesRunFacet.json#/$defs/PyConnectRangesRunFacet")
    assert facet["ranges"] == facet["intervalRanges"] == {"orders": {"0": [0, 7]}}
    assert (facet["connector"], facet["kind"], facet["records"]) == ("files", "source", 7)

    again = run_source(config, sqlite_url, ledger_key=key).to_dict()  # moves nothing
    lineage = operator_lineage("source", config, sqlite_url, again)
    (out,) = [_json(d) for d in lineage.outputs]
    assert out["outputFacets"]["outputStatistics"] == {**stats, "rowCount": 0, "size": 0}
    facet = _json(lineage.run_facets["pyconnectRanges"])
    assert facet["ranges"] == {} and facet["intervalRanges"] == {"orders": {"0": [0, 7]}}


def test_a_sql_sink_reports_its_table_and_columns(tmp_path: Path, sqlite_url: str) -> None:
    _write_orders(tmp_path / "in", 5)
    run_source({"name": "files", "connector.class": "connect_runtime.connectors.files.DirectorySource",
                "directory": str(tmp_path / "in"), "topic": "orders", "directory.scan.interval.ms": "0"}, sqlite_url)
    db = tmp_path / "dest.db"
    config = {"name": "to-sql", "connector.class": "connect_runtime.connectors.sql.SqlSink", "topics": "orders",
              "connection.url": f"sqlite:///{db}", "auto.create": "true"}
    data = run_sink(config, sqlite_url).to_dict()
    assert data["records"] == 5 and data["bytes"] == _stored_bytes(sqlite_url, "orders", 5)
    lineage = operator_lineage("sink", config, sqlite_url, data)
    assert [(d.namespace, d.name) for d in lineage.inputs] == [(backend_namespace(sqlite_url), "orders")]
    (out,) = [_json(d) for d in lineage.outputs]
    assert (out["namespace"], out["name"]) == (f"sqlite://{db}", "orders")
    assert [f["name"] for f in out["facets"]["schema"]["fields"]] == ["id", "who"]
    assert out["outputFacets"]["outputStatistics"] == {**out["outputFacets"]["outputStatistics"], "rowCount": 5,
                                                       "size": data["bytes"]}
    assert _json(lineage.run_facets["pyconnectRanges"])["ranges"] == {"orders": {"0": [0, 5]}}


def test_tasks_that_move_nothing_report_nothing() -> None:
    empty = operator_lineage(None, {}, "", None)
    assert (empty.inputs, empty.outputs, empty.run_facets) == ([], [], {})


def test_the_asset_converter_names_the_topic_on_the_connections_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.sdk import Asset

    monkeypatch.setenv("AIRFLOW_CONN_PYCONNECT_KAFKA",
                       json.dumps({"conn_type": "pyconnect", "host": "kafka://k1:9094,k2:9094"}))
    dataset = convert_asset_to_openlineage(Asset(uri="pyconnect://pyconnect_kafka/orders"), None)
    assert (dataset.namespace, dataset.name) == ("kafka://k1:9094", "orders")


def test_topics_carry_the_connect_schema_the_run_wrote_and_read(tmp_path: Path, sqlite_url: str) -> None:
    """Typed records (a struct schema) through Kafka Connect's JSON envelope: the source's output topic and the
    sink's input topic have the schema's columns, logical types by their names; schemaless topics have none."""
    from tests.support.typed_source import SHIPMENT_SCHEMAS

    envelope = {"value.converter": "org.apache.kafka.connect.json.JsonConverter",
                "value.converter.schemas.enable": "true"}
    source = {"name": "ships", "connector.class": "tests.support.typed_source.ShipmentSource", "topic": "ships",
              "count": "4", **envelope}
    result = run_source(source, sqlite_url)
    expected = [(f.name, f.schema.name or f.schema.type.value) for f in SHIPMENT_SCHEMAS["v1"].fields]
    assert ("amount", "org.apache.kafka.connect.data.Decimal") in expected
    (out,) = operator_lineage("source", source, sqlite_url, result.to_dict(), result.value_schemas).outputs
    assert [(f.name, f.type) for f in out.facets["schema"].fields] == expected
    sink = {"name": "ships-out", "connector.class": "connect_runtime.connectors.files.FileSink", "topics": "ships",
            "directory": str(tmp_path / "out"), **envelope}
    done = run_sink(sink, sqlite_url)
    lineage = operator_lineage("sink", sink, sqlite_url, done.to_dict(), done.value_schemas)
    assert [(f.name, f.type) for f in lineage.inputs[0].facets["schema"].fields] == expected
    assert "schema" not in lineage.outputs[0].facets  # a FileSink's files: no columns of their own


def test_the_asset_converter_never_looks_a_connection_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """The listener calls it in a forked process, where a lookup hangs: only what this process resolved counts."""
    from airflow.sdk import Asset

    from airflow_pyconnect.hooks.pyconnect import PyConnectHook

    monkeypatch.setattr("airflow_pyconnect.hooks.pyconnect.RESOLVED_URLS", {})
    monkeypatch.delenv("AIRFLOW_CONN_PYCONNECT_OTHER", raising=False)
    with pytest.raises(ValueError, match="'pyconnect_other' is not known in this process"):
        convert_asset_to_openlineage(Asset(uri="pyconnect://pyconnect_other/orders"), None)
    monkeypatch.setenv("AIRFLOW_CONN_PYCONNECT_OTHER", json.dumps({"conn_type": "pyconnect", "host": "kafka://k:1"}))
    assert PyConnectHook("pyconnect_other").backend_config()[0] == "kafka://k:1"  # a hook resolved it: remembered
    monkeypatch.delenv("AIRFLOW_CONN_PYCONNECT_OTHER")
    assert convert_asset_to_openlineage(Asset(uri="pyconnect://pyconnect_other/t"), None).namespace == "kafka://k:1"


def test_each_operator_reports_its_side_and_plans_report_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_pyconnect.operators.fanout import PyConnectPlanSourceOperator, PyConnectSourceTaskOperator
    from airflow_pyconnect.operators.fanout_sink import PyConnectPlanSinkOperator, PyConnectSinkTaskOperator
    from airflow_pyconnect.operators.sink import PyConnectSinkOperator
    from airflow_pyconnect.operators.source import PyConnectSourceOperator

    assert PyConnectSourceOperator.lineage_kind == PyConnectSourceTaskOperator.lineage_kind == "source"
    assert PyConnectSinkOperator.lineage_kind == PyConnectSinkTaskOperator.lineage_kind == "sink"
    assert PyConnectPlanSourceOperator.lineage_kind is PyConnectPlanSinkOperator.lineage_kind is None
    monkeypatch.setenv("AIRFLOW_CONN_PYCONNECT_DEFAULT",
                       json.dumps({"conn_type": "pyconnect", "host": "kafka://b1:9092,b2:9092"}))
    sink = PyConnectSinkOperator(task_id="archive", connector_config={
        "name": "a", "connector.class": "connect_runtime.connectors.files.FileSink", "topics": "orders",
        "directory": "/srv/archive"})
    assert sink.get_openlineage_facets_on_complete(None).outputs == []  # no run: nothing to report
    sink._lineage_result = {"connector": "a", "records": 3, "bytes": 30, "committed": {}, "ranges": {"orders": {"0": [0, 3]}}}
    lineage = sink.get_openlineage_facets_on_complete(None)
    assert [(d.namespace, d.name) for d in lineage.inputs] == [("kafka://b1:9092", "orders")]
    (out,) = lineage.outputs
    assert (out.namespace, out.name, out.outputFacets["outputStatistics"].rowCount) == ("file", "/srv/archive/orders", 3)
    plan = PyConnectPlanSinkOperator(task_id="p", connector_config={"name": "a", "connector.class": "x"})
    plan._lineage_result = {"connector": "a"}
    assert plan.get_openlineage_facets_on_complete(None).outputs == []


@pytest.mark.parametrize("exactly_once", [True, False])
def test_the_bytes_of_two_tasks_are_what_the_topic_received(sqlite_url: str, exactly_once: bool) -> None:
    config = {"name": "gen", "connector.class": "connect_runtime.connectors.datagen.DataGenSource", "topic": "t",
              "max.records": "50", "tasks.max": "2"}
    result = run_source(config, sqlite_url, exactly_once=exactly_once)
    with open_backend(sqlite_url) as be:
        stored = [r for p in range(be.list_topics()["t"]) for r in be.read_range(TopicPartition("t", p), 0, 1 << 40)]
    assert result.records == len(stored) == 50
    assert result.bytes == sum(len(r.key or b"") + len(r.value or b"") for r in stored)
