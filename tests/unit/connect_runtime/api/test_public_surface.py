"""Pins the public surface connector authors write against."""

from __future__ import annotations

import connect_runtime
import connect_runtime.api as api

EXPECTED_API = {
    "HIDDEN", "NO_DEFAULT", "BackendError", "BackendUnavailableError", "ConfigDef", "ConfigError",
    "ConfigKey", "ConfigValue", "ConnectError", "ConnectRecord", "Connector", "ConnectorContext",
    "ConnectorTransactionBoundaries", "Converter", "DataError", "DestinationOffsets", "ErrantRecordReporter",
    "ExactlyOnceSupport", "Headers", "Importance", "OffsetStorageReader", "Password", "Predicate",
    "ProducerFencedError", "Range", "RecordMetadata", "RetriableError", "SinkConnector",
    "SinkConnectorContext", "SinkRecord", "SinkTask", "SinkTaskContext", "SourceConnector",
    "SourceConnectorContext", "SourceRecord", "SourceTask", "SourceTaskContext", "TopicPartition",
    "TransactionContext", "Transformation", "Type", "ValidString", "WaitTimeoutError", "mask",
    "non_empty_string", "valid_regex",
    # why a source read nothing (connect_runtime.api.source)
    "COMMITTED_BEFORE", "NO_INPUT", "NothingRead",
    # Kafka Connect's data model (connect_runtime.api.data)
    "Field", "Schema", "SchemaAndValue", "SchemaBuilder", "SchemaType", "Struct",
}


def test_api_all_is_pinned() -> None:
    assert set(api.__all__) == EXPECTED_API
    for name in api.__all__:
        assert hasattr(api, name), name


def test_package_reexports_api_and_run_entry_points() -> None:
    assert set(connect_runtime.__all__) == EXPECTED_API | {
        "run_source", "run_sink", "SourceRunResult", "SinkRunResult", "open_backend", "plan_source", "run_source_task",
        "plan_sink", "run_sink_task",
    }
    for name in connect_runtime.__all__:
        assert getattr(connect_runtime, name) is not None, name


def test_error_tree() -> None:
    for err in (api.ConfigError, api.DataError, api.RetriableError, api.ProducerFencedError,
                api.BackendError, api.WaitTimeoutError):
        assert issubclass(err, api.ConnectError)
    assert issubclass(api.BackendUnavailableError, api.BackendError)
    e = api.ConfigError(errors={"tasks.max": "expected an integer, got 'x'", "name": "missing"})
    assert "tasks.max: expected an integer, got 'x'" in str(e)
    assert "name: missing" in str(e)
    assert e.errors["name"] == "missing"


def test_records() -> None:
    tp = api.TopicPartition("orders", 3)
    assert tp == ("orders", 3) and hash(tp) == hash(api.TopicPartition("orders", 3))
    r = api.SourceRecord(source_partition={"f": "a"}, source_offset={"pos": 1}, topic="t", value={"x": 1})
    assert r.key is None and r.partition is None and r.headers is None
    r2 = r.new_record(topic="u")
    assert r2.topic == "u" and r2.source_offset == {"pos": 1} and r.topic == "t"
    assert r2 != r and r.new_record() == r
    s = api.SinkRecord(topic="t", partition=0, offset=5, value="v")
    assert s.topic_partition == api.TopicPartition("t", 0)
    assert "offset=5" in repr(s)


def test_default_pre_commit_flushes_then_returns_everything() -> None:
    calls: list[object] = []

    class Sink(api.SinkTask):
        def start(self, props): ...
        def put(self, records): ...
        def flush(self, current_offsets):
            calls.append(dict(current_offsets))

    tp = api.TopicPartition("t", 0)
    assert Sink().pre_commit({tp: 7}) == {tp: 7}
    assert calls == [{tp: 7}]


def test_optional_hooks_have_defaults() -> None:
    class Src(api.SourceConnector):
        def config_def(self):
            return api.ConfigDef()
        def start(self, props): ...
        def task_class(self):
            return api.SourceTask
        def task_configs(self, max_tasks):
            return []

    c = Src()
    assert c.exactly_once_support({}) is None
    assert c.can_define_transaction_boundaries({}) is api.ConnectorTransactionBoundaries.UNSUPPORTED
    assert c.version() == "unknown"
    assert c.validate({}) == []
