"""Which names the offsets API knows (``connect_runtime.admin.require_connector``), on an SQLite store in
``tmp_path``: a name with offsets and no run (a Kafka Connect connector sharing the offsets store) is known; a
config whose ``connector.class`` is not on this machine (Kafka Connect's ``org.apache...``) is accepted by get,
set, reset and alter; a live run refuses every change; a name with no run, no offsets and no config is not found,
with a did-you-mean. Through the admin API and through ``pyconnect offsets`` in-process (``cli.main``).

Kafka Connect itself writing and resuming from these offsets: ``tests/integration/test_kafka_connect_offsets.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from connect_runtime import admin
from connect_runtime.api.errors import ConfigError, ConnectorRunningError
from connect_runtime.api.records import TopicPartition
from connect_runtime.backends import open_backend
from connect_runtime.backends.base import Backend
from connect_runtime.cli import main
from connect_runtime.runtime.registry import Registry

FILE_STREAM_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
FILE_STREAM_SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
NAME = "local-file-source"
FILE = "/var/data/test.txt"
TOPIC = "lines"


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/store.db"


@pytest.fixture
def backend(url: str) -> Iterator[Backend]:
    with open_backend(url) as b:
        b.create_topics({TOPIC: 2})
        yield b


def connect_writes(backend: Backend, name: str, filename: str, position: int | None) -> None:
    """An offset record as a Kafka Connect worker writes it: JsonConverter's bytes, insertion order, no run of
    ours registered."""
    key = json.dumps([name, {"filename": filename}], separators=(",", ":")).encode()
    value = None if position is None else json.dumps({"position": position}, separators=(",", ":")).encode()
    store = backend.offset_store(None)
    try:
        store.put([(key, value)], 5.0)
    finally:
        store.close()


def entry(position: int | None, filename: str = FILE) -> dict[str, Any]:
    return {"partition": {"filename": filename}, "offset": None if position is None else {"position": position}}


def connect_config(tmp_path: Path, cls: str = FILE_STREAM_SOURCE, name: str = NAME) -> Path:
    path = tmp_path / f"{name}.properties"
    path.write_text(f"name={name}\nconnector.class={cls}\ntasks.max=1\nfile={FILE}\ntopic={TOPIC}\n")
    return path


def cli(capsys: pytest.CaptureFixture[str], url: str, *args: str) -> tuple[int, Any, str]:
    rc = main(["--backend", url, *args])
    out, err = capsys.readouterr()
    return rc, (json.loads(out) if out.strip() else None), err


# -- the admin API ---------------------------------------------------------------------------------


def test_a_name_with_offsets_and_no_run_is_known(backend: Backend) -> None:
    connect_writes(backend, NAME, FILE, 4096)
    assert admin.list_connectors(backend) == []
    assert admin.stored_names(backend) == [NAME]
    assert admin.get_offsets(backend, NAME) == {"offsets": [entry(4096)]}
    assert admin.alter_offsets(backend, NAME, [entry(100)]) == {"connector": NAME, "altered": 1}
    assert admin.get_offsets(backend, NAME) == {"offsets": [entry(100)]}
    assert admin.reset_offsets(backend, NAME) == {"connector": NAME, "source_partitions_reset": 1,
                                                  "sink_partitions_reset": 0}
    # reset deleted its last offset: nothing is known of it any more (no run, no offsets, no config)
    with pytest.raises(admin.ConnectorNotFound):
        admin.get_offsets(backend, NAME)


def test_unregistered_connectors_are_listed_with_their_offsets(backend: Backend) -> None:
    """What the Connectors view lists beside the registry's: names with offsets and no run, from one read; a
    record under a Connect-format key whose value is not a JSON object (someone else's) is passed over."""
    connect_writes(backend, NAME, FILE, 4096)
    connect_writes(backend, NAME, "/var/data/other.txt", 8)
    Registry(backend, 5.0).begin("ours", kind="source", connector_class="connect_runtime.connectors.datagen.DataGenSource")
    store = backend.offset_store(None)
    try:
        store.put([(b'["ours",{"task":0}]', b'{"position":1}'), (b'["garbled",{"f":1}]', b"not json"),
                   (b'["listed",{"f":1}]', b"[1]")], 5.0)
    finally:
        store.close()
    [listed] = admin.unregistered_connectors(backend)
    assert (listed["name"], listed["registered"], listed["kind"], listed["state"], listed["running"]) == (
        NAME, False, "source", "stopped", False)
    assert listed["offsets"] == [entry(8, "/var/data/other.txt"), entry(4096)] == admin.get_offsets(backend, NAME)[
        "offsets"]
    assert admin.stored_names(backend) == [NAME, "ours"]


def test_a_group_with_committed_offsets_and_no_run_is_known(backend: Backend) -> None:
    consumer = backend.consumer(admin.sink_group("connect-file-sink"))
    try:
        consumer.commit({TopicPartition(TOPIC, 1): 7}, 5.0)
    finally:
        consumer.close()
    assert admin.get_offsets(backend, "connect-file-sink") == {"offsets": [
        {"partition": {"kafka_topic": TOPIC, "kafka_partition": 1}, "offset": {"kafka_offset": 7}}]}


def test_nothing_known_is_not_found_with_a_did_you_mean_over_stored_names(backend: Backend) -> None:
    connect_writes(backend, NAME, FILE, 10)
    for call in (lambda: admin.get_offsets(backend, "local-file-sourc"),
                 lambda: admin.alter_offsets(backend, "local-file-sourc", [entry(1)]),
                 lambda: admin.reset_offsets(backend, "local-file-sourc")):
        with pytest.raises(admin.ConnectorNotFound, match=r"^connector 'local-file-sourc' not found: no run of it "
                                                          r"is registered in this store and no offsets are stored "
                                                          r"under that name \(did you mean 'local-file-source'\?\)$"):
            call()
    assert admin.stored_names(backend) == [NAME] and admin.list_connectors(backend) == []  # nothing written


def test_a_config_whose_class_is_not_here_is_accepted(backend: Backend) -> None:
    config = {"name": NAME, "connector.class": FILE_STREAM_SOURCE, "file": FILE, "topic": TOPIC}
    assert admin.config_kind(config) is None
    assert admin.get_offsets(backend, NAME, config=config) == {"offsets": []}
    assert admin.alter_offsets(backend, NAME, [entry(42)], config=config) == {"connector": NAME, "altered": 1}
    assert admin.get_offsets(backend, NAME) == {"offsets": [entry(42)]}
    [listed] = admin.list_connectors(backend)  # registered, stopped, as a config gives it before its first run
    assert (listed["name"], listed["kind"], listed["state"], listed["connector_class"]) == (
        NAME, "source", "stopped", FILE_STREAM_SOURCE)
    assert admin.reset_offsets(backend, NAME, config=config)["source_partitions_reset"] == 1
    assert admin.get_offsets(backend, NAME, config=config) == {"offsets": []}
    # a Kafka Connect sink's offsets are its group's (KIP-875), set from its config alike
    sink = {"name": "file-sink", "connector.class": FILE_STREAM_SINK, "topics": TOPIC}
    change = [{"partition": {"kafka_topic": TOPIC, "kafka_partition": 0}, "offset": {"kafka_offset": 3}}]
    assert admin.alter_offsets(backend, "file-sink", change, config=sink) == {"connector": "file-sink", "altered": 1}
    assert admin.sink_offsets(backend, "file-sink") == {TopicPartition(TOPIC, 0): 3}


def test_a_class_whose_package_is_here_is_still_checked(backend: Backend) -> None:
    """A typo under a package that is on this machine is an error, never offsets sent somewhere else."""
    for cls, why in (("connect_runtime.connectors.files.FileSinkk", "has no class 'FileSinkk'"),
                     ("connect_runtime.connectorz.FileSink", "cannot be imported")):
        config = {"name": "archive", "connector.class": cls, "topics": TOPIC}
        with pytest.raises(ConfigError, match=why):
            admin.alter_offsets(backend, "archive", [entry(1)], config=config)
    assert admin.list_connectors(backend) == [] and admin.stored_names(backend) == []


def test_a_live_run_refuses_every_change_even_with_a_foreign_config(backend: Backend) -> None:
    connect_writes(backend, NAME, FILE, 5)
    Registry(backend, 5.0).begin(NAME, kind="source", connector_class="connect_runtime.connectors.files.DirectorySource")
    config = {"name": NAME, "connector.class": FILE_STREAM_SOURCE}
    for call in (lambda: admin.alter_offsets(backend, NAME, [entry(1)]),
                 lambda: admin.alter_offsets(backend, NAME, [entry(1)], config=config),
                 lambda: admin.reset_offsets(backend, NAME, config=config)):
        with pytest.raises(ConnectorRunningError, match=f"connector '{NAME}' is running"):
            call()
    assert admin.get_offsets(backend, NAME) == {"offsets": [entry(5)]}  # reading is always allowed, nothing changed


# -- pyconnect offsets -----------------------------------------------------------------------------


def test_cli_reads_and_sets_offsets_of_a_name_with_no_run(backend: Backend, url: str, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    connect_writes(backend, NAME, FILE, 4096)
    assert cli(capsys, url, "offsets", "get", NAME) == (0, {"offsets": [entry(4096)]}, "")
    config = connect_config(tmp_path)
    rc, out, err = cli(capsys, url, "offsets", "set", str(config), "--partition", json.dumps({"filename": FILE}),
                       "--offset", '{"position": 12}')
    assert (rc, out, err) == (0, {"connector": NAME, "partition": {"filename": FILE}, "offset": {"position": 12}}, "")
    assert cli(capsys, url, "offsets", "get", str(config)) == (0, {"offsets": [entry(12)]}, "")
    assert cli(capsys, url, "offsets", "reset", str(config)) == (
        0, {"connector": NAME, "source_partitions_reset": 1, "sink_partitions_reset": 0}, "")


def test_cli_exit_1_with_did_you_mean_for_a_name_with_nothing(backend: Backend, url: str,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    connect_writes(backend, NAME, FILE, 1)
    for args in (("get", "local-file"), ("reset", "local-file"),
                 ("set", "local-file", "--partition", "{}", "--offset", "null")):
        rc, out, err = cli(capsys, url, "offsets", *args)
        assert (rc, out) == (1, None)
        assert err.startswith("error: connector 'local-file' not found: no run of it is registered in this store and "
                              "no offsets are stored under that name (did you mean 'local-file-source'?)")
        assert err.count("\n") == 1
