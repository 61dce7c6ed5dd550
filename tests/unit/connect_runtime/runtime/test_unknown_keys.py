"""``unknown_keys``: config keys nothing reads, with a did-you-mean (issue 10: a typo'd
``exactly.once.suport=required`` was silently ignored, so the exactly-once preflight never ran)."""

from __future__ import annotations

import pytest

from connect_runtime import run_source
from connect_runtime.api.config import ConfigDef, Type
from connect_runtime.api.errors import ConfigError
from connect_runtime.cli import validation_errors, validation_warnings
from connect_runtime.connectors.datagen import CONFIG as DATAGEN_CONFIG
from connect_runtime.runtime.config import (
    SINK_CONFIG,
    SOURCE_CONFIG,
    misspelling_of,
    misspelt_keys,
    unknown_keys,
)

BASE = {"name": "c", "connector.class": "connect_runtime.connectors.datagen.DataGenSource", "topic": "t"}


def test_a_typo_is_named_with_the_closest_known_key() -> None:
    got = unknown_keys({**BASE, "exactly.once.suport": "required"}, SOURCE_CONFIG, DATAGEN_CONFIG)
    assert list(got) == ["exactly.once.suport"]
    assert "did you mean 'exactly.once.support'?" in got["exactly.once.suport"]
    assert "'exactly.once.suport' is ignored" in got["exactly.once.suport"]


def test_connector_fields_count_as_known_and_get_suggested() -> None:
    got = unknown_keys({**BASE, "max.records": "5", "max.record": "5"}, SOURCE_CONFIG, DATAGEN_CONFIG)
    assert list(got) == ["max.record"] and "did you mean 'max.records'?" in got["max.record"]
    assert "max.record" in unknown_keys({**BASE, "max.record": "5"}, SOURCE_CONFIG)  # without the connector's def


def test_case_only_differences_are_suggested() -> None:
    got = unknown_keys({**BASE, "Tasks.Max": "2"}, SOURCE_CONFIG, DATAGEN_CONFIG)
    assert "did you mean 'tasks.max'?" in got["Tasks.Max"]


def test_nothing_close_gives_no_suggestion() -> None:
    got = unknown_keys({**BASE, "zzz": "1"}, SOURCE_CONFIG, DATAGEN_CONFIG)
    assert list(got) == ["zzz"] and "did you mean" not in got["zzz"]


def test_plugin_and_client_prefixes_are_known() -> None:
    props = {**BASE, "value.converter.schemas.enable": "false", "key.converter.converter.encoding": "utf-8",
             "header.converter.x": "1", "producer.override.acks": "all", "consumer.override.fetch.min.bytes": "1",
             "admin.override.x": "1", "errors.deadletterqueue.topic.name": "dlq", "errors.tolerance": "all"}
    assert unknown_keys(props, SOURCE_CONFIG, DATAGEN_CONFIG) == {}


def test_errors_keys_must_be_kafka_connect_names() -> None:
    got = unknown_keys({**BASE, "errors.tolerence": "all"}, SINK_CONFIG)
    assert "did you mean 'errors.tolerance'?" in got["errors.tolerence"]


def test_transform_and_predicate_keys_need_a_listed_alias() -> None:
    props = {**BASE, "transforms": "mask, route", "transforms.mask.type": "x", "transforms.mask.fields": "a",
             "transforms.route.type": "y", "transforms.maks.fields": "b",
             "predicates": ["isT"], "predicates.isT.type": "z", "predicates.ist.pattern": "p",
             "transforms.mask": "no field after the alias"}
    got = unknown_keys(props, SOURCE_CONFIG, DATAGEN_CONFIG)
    assert set(got) == {"transforms.maks.fields", "predicates.ist.pattern", "transforms.mask"}
    assert "'maks' is not an alias listed in transforms" in got["transforms.maks.fields"]
    assert "did you mean 'mask'?" in got["transforms.maks.fields"]
    assert "did you mean 'isT'?" in got["predicates.ist.pattern"]
    no_list = unknown_keys({**BASE, "transforms.a.type": "x"}, SOURCE_CONFIG, DATAGEN_CONFIG)
    assert "transforms is empty" in no_list["transforms.a.type"]


def test_every_def_given_counts() -> None:
    extra = ConfigDef().define("my.field", Type.STRING, default=None)
    assert unknown_keys({**BASE, "my.field": "x"}, SOURCE_CONFIG, DATAGEN_CONFIG, extra) == {}
    assert list(unknown_keys({**BASE, "my.field": "x"}, SOURCE_CONFIG, DATAGEN_CONFIG)) == ["my.field"]


def test_cli_validation_warnings_use_the_run_kind_and_the_connector() -> None:
    assert validation_warnings({**BASE, "max.records": "3", "poll.idle.timeout.ms": "0"}) == {}
    got = validation_warnings({**BASE, "exactly.once.suport": "required", "topics": "a", "my.own.key": "1"})
    assert set(got) == {"topics", "my.own.key"}  # topics is a sink field; the misspelling is an error instead
    sink = {"name": "s", "connector.class": "connect_runtime.connectors.files.FileSink", "topics": "a",
            "directory": "/tmp", "exactly.once.support": "required"}
    assert set(validation_warnings(sink)) == {"exactly.once.support"}  # a source field on a sink
    assert validation_warnings({"name": "x", "connector.class": "no.such.Class", "foo": "1"}) == {}


def test_a_misspelling_of_a_defined_key_is_an_error_naming_the_key_meant() -> None:
    got = misspelt_keys({**BASE, "exactly.once.suport": "required", "Tasks_Max": "2", "max.record": "3",
                         "my.own.key": "1", "poll.idle.timeout.ms": "0"}, SOURCE_CONFIG, DATAGEN_CONFIG)
    assert set(got) == {"exactly.once.suport", "Tasks_Max", "max.record"}
    assert "did you mean 'exactly.once.support'?" in got["exactly.once.suport"]
    assert "did you mean 'tasks.max'?" in got["Tasks_Max"]


@pytest.mark.parametrize(("key", "meant"), [
    ("exactly.once.suport", "exactly.once.support"),  # a letter left out
    ("exactyl.once.support", "exactly.once.support"),  # two neighbours swapped
    ("table.inclde.lst", "table.include.list"),  # two edits in a long key
    ("TOPIC", "topic"), ("batch-size", "batch.size"),  # case, separators
    ("topik", "topic"),  # one edit in a short key
    ("topcs", None),  # two edits in a short key: not taken for a typo
    ("poll.idle.timeout.ms", None), ("my.own.key", None),  # far from every candidate
    ("abc", None),  # close to two candidates: ambiguous, so not taken for one of them
])
def test_what_counts_as_a_misspelling(key: str, meant: str | None) -> None:
    candidates = ["exactly.once.support", "table.include.list", "topic", "batch.size", "abd", "abe"]
    assert misspelling_of(key, candidates) == meant


def test_validate_and_a_run_refuse_a_misspelt_key() -> None:
    config = {**BASE, "max.records": "3", "max.record": "5"}
    assert validation_errors(config) == {}  # the right key is there too: only a warning
    config = {**BASE, "tasks.mx": "2"}
    errors = validation_errors(config)
    assert list(errors) == ["tasks.mx"] and "did you mean 'tasks.max'?" in errors["tasks.mx"]
    assert validation_warnings(config) == {}
    with pytest.raises(ConfigError, match=r"tasks\.mx.*did you mean 'tasks\.max'") as info:
        run_source(config, "sqlite:///:memory:")
    assert set(info.value.errors) == {"tasks.mx"}
