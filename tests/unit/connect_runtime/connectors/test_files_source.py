"""DirectorySource: planning from committed offsets (KIP-131), byte-offset resume, reconfiguration.

Everything runs against a real SQLite backend file: the connector-level tests read offsets through
the runtime's ``StoreOffsetReader``; the rest are real ``run_source`` runs.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from connect_runtime.api import (
    DataError,
    ExactlyOnceSupport,
    OffsetStorageReader,
    SourceConnectorContext,
    TopicPartition,
)
from connect_runtime.backends import Backend, open_backend
from connect_runtime.connectors.files import DirectorySource, is_finished, scan_directory
from connect_runtime.runtime.offsets import StoreOffsetReader, connector_offsets, offset_key, offset_value
from connect_runtime.runtime.source import run_source

NAME = "files"


class RecordingContext(SourceConnectorContext):
    """The connector side of the runtime's context: real offsets, reconfiguration requests counted."""

    def __init__(self, reader: OffsetStorageReader) -> None:
        self._reader = reader
        self.requests = 0
        self.errors: list[BaseException] = []

    @property
    def offset_storage_reader(self) -> OffsetStorageReader:
        return self._reader

    def request_task_reconfiguration(self) -> None:
        self.requests += 1

    def raise_error(self, exc: BaseException) -> None:
        self.errors.append(exc)


@pytest.fixture
def backend(sqlite_url: str) -> Iterator[Backend]:
    with open_backend(sqlite_url) as be:
        yield be


def commit_offsets(backend: Backend, offsets: dict[str, dict[str, Any]]) -> None:
    store = backend.offset_store()
    try:
        store.put([(offset_key(NAME, {"file": f}), offset_value(o)) for f, o in offsets.items()], 10)
    finally:
        store.close()


def committed(backend: Backend) -> dict[str, dict[str, Any]]:
    store = backend.offset_store()
    try:
        return {p["file"]: o for p, o in connector_offsets(store, NAME)}
    finally:
        store.close()


def config(directory: Path, **extra: str) -> dict[str, str]:
    cfg = {"name": NAME, "connector.class": "connect_runtime.connectors.files.DirectorySource",
           "directory": str(directory), "topic": "lines", "poll.idle.timeout.ms": "300"}
    cfg.update({k.replace("_", "."): v for k, v in extra.items()})
    return cfg


def topic_values(backend: Backend, topic: str = "lines") -> list[Any]:
    topics = backend.list_topics()
    if topic not in topics:
        return []
    consumer = backend.consumer(None)
    tps = [TopicPartition(topic, p) for p in range(topics[topic])]
    try:
        ends = consumer.end_offsets(tps, 10)
    finally:
        consumer.close()
    return [json.loads(r.value) for tp in tps for r in backend.read_range(tp, 0, ends[tp])]


def write_lines(path: Path, n: int, start: int = 0) -> None:
    with open(path, "a") as f:
        for i in range(start, start + n):
            f.write(json.dumps({"f": path.name, "i": i}) + "\n")


# ---------------------------------------------------------------------------------------- planning


def test_plan_skips_finished_files_and_deals_the_rest_round_robin(tmp_path: Path, backend: Backend) -> None:
    d = tmp_path / "in"
    d.mkdir()
    for name in ("a.jsonl", "b.jsonl", "c.jsonl", "d.jsonl", "e.jsonl"):
        write_lines(d / name, 3)
    (d / "notes.txt").write_text("not matched by the pattern\n")
    (d / ".partial.jsonl").write_text('{"temp": 1}\n')
    size = (d / "a.jsonl").stat().st_size
    commit_offsets(backend, {
        "a.jsonl": {"position": size, "line": 3, "done": True},        # finished: skipped
        "b.jsonl": {"position": size - 10, "line": 2, "done": True},   # grew since: read again
        "c.jsonl": {"position": 20, "line": 1, "done": False},         # half read
    })
    conn = DirectorySource()
    ctx = RecordingContext(StoreOffsetReader(backend.offset_store(), NAME))
    conn.initialize(ctx)
    conn.start(config(d, pattern="*.jsonl", directory_scan_interval_ms="0"))
    try:
        tasks = conn.task_configs(2)
    finally:
        conn.stop()
    assert [json.loads(t["task.files"]) for t in tasks] == [["b.jsonl", "d.jsonl"], ["c.jsonl", "e.jsonl"]]
    assert all(t["topic"] == "lines" and t["directory"] == str(d) for t in tasks)
    assert ctx.requests == 0
    assert conn.exactly_once_support({}) is ExactlyOnceSupport.SUPPORTED


def test_plan_has_at_most_one_task_per_file_and_none_when_everything_is_finished(
    tmp_path: Path, backend: Backend
) -> None:
    d = tmp_path / "in"
    d.mkdir()
    write_lines(d / "only.jsonl", 2)
    conn = DirectorySource()
    conn.initialize(RecordingContext(StoreOffsetReader(backend.offset_store(), NAME)))
    conn.start(config(d, directory_scan_interval_ms="0"))
    assert len(conn.task_configs(8)) == 1
    conn.stop()
    commit_offsets(backend, {"only.jsonl": {"position": (d / "only.jsonl").stat().st_size, "line": 2, "done": True}})
    conn.start(config(d, directory_scan_interval_ms="0"))
    assert conn.task_configs(8) == []
    conn.stop()


def test_scan_and_finished_helpers(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "x.csv").write_text("a\n1\n")
    (tmp_path / "y.csv").write_text("a\n")
    assert scan_directory(tmp_path, "**/*.csv") == {"sub/x.csv": 4, "y.csv": 2}
    assert is_finished({"position": 4, "done": True}, 4)
    assert not is_finished({"position": 4, "done": True}, 5)
    assert not is_finished({"position": 4, "done": False}, 4)
    assert not is_finished(None, 0)


def test_new_file_requests_task_reconfiguration_and_stop_ends_the_check(tmp_path: Path, backend: Backend) -> None:
    d = tmp_path / "in"
    d.mkdir()
    write_lines(d / "a.jsonl", 1)
    conn = DirectorySource()
    ctx = RecordingContext(StoreOffsetReader(backend.offset_store(), NAME))
    conn.initialize(ctx)
    conn.start(config(d, directory_scan_interval_ms="50"))
    try:
        assert [json.loads(t["task.files"]) for t in conn.task_configs(4)] == [["a.jsonl"]]
        time.sleep(0.3)
        assert ctx.requests == 0  # nothing new: no request
        write_lines(d / "a.jsonl", 1, start=1)  # a file being read grows: tasks follow it themselves
        (d / ".b.jsonl.tmp").write_text("{}\n")  # hidden temp file: ignored
        time.sleep(0.3)
        assert ctx.requests == 0
        (d / ".b.jsonl.tmp").rename(d / "b.jsonl")
        deadline = time.monotonic() + 10
        while ctx.requests == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert ctx.requests == 1
        assert sorted(f for t in conn.task_configs(4) for f in json.loads(t["task.files"])) == ["a.jsonl", "b.jsonl"]
    finally:
        conn.stop()
    assert not any(t.name == "DirectorySource-scan" for t in threading.enumerate())
    time.sleep(0.2)
    (d / "c.jsonl").write_text("{}\n")
    time.sleep(0.3)
    assert ctx.requests == 1  # stopped: no more checks


def test_validate_reports_a_missing_directory(tmp_path: Path) -> None:
    errors = {cv.name: cv.errors for cv in DirectorySource().validate(
        {"directory": str(tmp_path / "nope"), "topic": "t"})}
    assert errors["directory"] and "existing directory" in errors["directory"][0]
    assert errors["topic"] == []
    errors = {cv.name: cv.errors for cv in DirectorySource().validate(
        {"directory": str(tmp_path), "topic": "t", "pattern": "../*.jsonl"})}
    assert errors["directory"] == [] and "relative to directory" in errors["pattern"][0]


# ------------------------------------------------------------------------------------ bounded runs


def test_resume_at_committed_byte_offsets_after_a_partial_run(
    tmp_path: Path, sqlite_url: str, backend: Backend
) -> None:
    d = tmp_path / "in"
    d.mkdir()
    write_lines(d / "a.jsonl", 10)
    write_lines(d / "b.jsonl", 5)
    first = run_source(config(d, batch_size="3"), sqlite_url, max_records=4)
    assert first.records == 4
    offsets = committed(backend)
    assert offsets["a.jsonl"]["done"] is False
    assert offsets["a.jsonl"]["line"] == 4
    with open(d / "a.jsonl", "rb") as f:
        assert offsets["a.jsonl"]["position"] == len(b"".join(f.readline() for _ in range(4)))
    second = run_source(config(d, batch_size="3"), sqlite_url)
    assert second.records == 11
    values = topic_values(backend)
    assert values == [{"f": "a.jsonl", "i": i} for i in range(10)] + [{"f": "b.jsonl", "i": i} for i in range(5)]
    offsets = committed(backend)
    for name in ("a.jsonl", "b.jsonl"):
        assert offsets[name]["done"] is True
        assert offsets[name]["position"] == (d / name).stat().st_size
    # nothing left: an empty, successful run; then an appended file is read from where it ended
    assert run_source(config(d), sqlite_url).records == 0
    write_lines(d / "b.jsonl", 2, start=5)
    assert run_source(config(d), sqlite_url).records == 2
    assert topic_values(backend)[-2:] == [{"f": "b.jsonl", "i": 5}, {"f": "b.jsonl", "i": 6}]


def test_csv_header_is_re_read_on_resume(tmp_path: Path, sqlite_url: str, backend: Backend) -> None:
    d = tmp_path / "in"
    d.mkdir()
    (d / "people.csv").write_text('\ufeffid,name,city\r\n1,ann,"Oslo, NO"\r\n2,"bo\nb",Rome\r\n3,cy,\r\n')
    assert run_source(config(d), sqlite_url, max_records=1).records == 1
    assert run_source(config(d), sqlite_url).records == 2
    assert topic_values(backend) == [
        {"id": "1", "name": "ann", "city": "Oslo, NO"},
        {"id": "2", "name": "bo\nb", "city": "Rome"},
        {"id": "3", "name": "cy", "city": ""},
    ]
    assert committed(backend)["people.csv"] == {"position": (d / "people.csv").stat().st_size, "line": 5,
                                                 "done": True}


def test_partial_last_line_waits_until_it_is_complete(tmp_path: Path, sqlite_url: str, backend: Backend) -> None:
    d = tmp_path / "in"
    d.mkdir()
    (d / "a.jsonl").write_text('{"n": 1}\n{"n": 2}\n{"n": ')
    assert run_source(config(d), sqlite_url).records == 2
    assert committed(backend)["a.jsonl"] == {"position": 18, "line": 2, "done": False}
    assert run_source(config(d), sqlite_url).records == 0
    with open(d / "a.jsonl", "a") as f:
        f.write('3}\n\n\n')
    assert run_source(config(d), sqlite_url).records == 1
    assert topic_values(backend) == [{"n": 1}, {"n": 2}, {"n": 3}]
    assert committed(backend)["a.jsonl"] == {"position": (d / "a.jsonl").stat().st_size, "line": 5, "done": True}


def test_key_field_and_several_tasks(tmp_path: Path, sqlite_url: str, backend: Backend) -> None:
    d = tmp_path / "in"
    d.mkdir()
    for name in ("a.jsonl", "b.jsonl", "c.jsonl"):
        write_lines(d / name, 50)
    result = run_source(config(d, key_field="i", tasks_max="2"), sqlite_url)
    assert result.records == 150
    consumer = backend.consumer(None)
    try:
        end = consumer.end_offsets([TopicPartition("lines", 0)], 10)[TopicPartition("lines", 0)]
    finally:
        consumer.close()
    recs = list(backend.read_range(TopicPartition("lines", 0), 0, end))
    assert sorted((json.loads(r.key), json.loads(r.value)["i"]) for r in recs) == sorted(
        (i, i) for _ in range(3) for i in range(50))


def test_a_new_file_during_a_run_is_read_in_the_same_run(tmp_path: Path, sqlite_url: str, backend: Backend) -> None:
    d = tmp_path / "in"
    d.mkdir()
    write_lines(d / "a.jsonl", 5)

    def add_file_once_a_was_committed() -> None:
        # b appears only after the run planned and committed a: only a reconfiguration can read it now
        with open_backend(sqlite_url) as be:
            deadline = time.monotonic() + 20
            while "a.jsonl" not in committed(be) and time.monotonic() < deadline:
                time.sleep(0.01)
        write_lines(d / "b.jsonl", 7)

    writer = threading.Thread(target=add_file_once_a_was_committed)
    writer.start()
    try:
        result = run_source(config(d, directory_scan_interval_ms="50", poll_idle_timeout_ms="1500"),
                            sqlite_url, max_seconds=30)
    finally:
        writer.join(timeout=30)
    assert result.records == 12
    assert sorted(v["f"] for v in topic_values(backend)) == ["a.jsonl"] * 5 + ["b.jsonl"] * 7
    assert committed(backend)["b.jsonl"]["done"] is True


def test_malformed_line_fails_the_run_naming_file_and_line(tmp_path: Path, sqlite_url: str, backend: Backend) -> None:
    d = tmp_path / "in"
    d.mkdir()
    (d / "bad.jsonl").write_text('{"n": 1}\n{"n": 2}\n{"n": oops}\n{"n": 4}\n')
    with pytest.raises(DataError, match=r"bad\.jsonl: line 3: malformed JSON"):
        run_source(config(d), sqlite_url)
    # the records before the bad line were committed at their poll boundary; the bad line was not
    assert topic_values(backend) == [{"n": 1}, {"n": 2}]
    assert committed(backend)["bad.jsonl"]["line"] == 2
    with pytest.raises(DataError, match=r"line 3"):
        run_source(config(d), sqlite_url)
    # errors.tolerance=all: the task skips it and the file is finished
    assert run_source(config(d, errors_tolerance="all"), sqlite_url).records == 1
    assert topic_values(backend) == [{"n": 1}, {"n": 2}, {"n": 4}]
    assert committed(backend)["bad.jsonl"]["done"] is True


def test_malformed_csv_row_names_file_and_line(tmp_path: Path, sqlite_url: str) -> None:
    d = tmp_path / "in"
    d.mkdir()
    (d / "t.csv").write_text("a,b\n1,2\n3\n")
    with pytest.raises(DataError, match=r"t\.csv: line 3: malformed CSV: expected 2 fields"):
        run_source(config(d), sqlite_url)


def test_unknown_extension_without_format_is_a_config_error(tmp_path: Path, sqlite_url: str) -> None:
    d = tmp_path / "in"
    d.mkdir()
    (d / "a.log").write_text('{"n": 1}\n')
    with pytest.raises(Exception, match="set format=jsonl or format=csv"):
        run_source(config(d), sqlite_url)
    assert run_source(config(d, format="jsonl"), sqlite_url).records == 1


def test_a_replaced_shorter_file_is_read_again(tmp_path: Path, sqlite_url: str, backend: Backend) -> None:
    d = tmp_path / "in"
    d.mkdir()
    write_lines(d / "a.jsonl", 20)
    assert run_source(config(d), sqlite_url).records == 20
    (d / "a.jsonl").write_text('{"new": 1}\n')
    assert run_source(config(d), sqlite_url).records == 1
    assert topic_values(backend)[-1] == {"new": 1}


def test_connector_transaction_boundary_commits_per_file(tmp_path: Path, sqlite_url: str) -> None:
    d = tmp_path / "in"
    d.mkdir()
    write_lines(d / "a.jsonl", 3)
    write_lines(d / "b.jsonl", 3)
    result = run_source(config(d, transaction_boundary="connector", batch_size="100"), sqlite_url)
    assert result.records == 6
    assert result.transactions == 2  # one transaction per finished file


# ------------------------------------------------------------- bad lines and final files (issue 10)


def test_skipped_bad_lines_are_counted_and_not_read_again(tmp_path: Path, sqlite_url: str, backend: Backend) -> None:
    d = tmp_path / "in"
    d.mkdir()
    (d / "a.jsonl").write_text('{"n": 1}\n{"n": oops}\n{"n": 3}\nnot json either\n')
    (d / "b.csv").write_text("x,y\n1,2\n3\n4,5\n")
    result = run_source(config(d, errors_tolerance="all"), sqlite_url)
    assert (result.records, result.skipped) == (4, 3)
    got = topic_values(backend)
    assert sorted(got, key=lambda v: json.dumps(v, sort_keys=True)) == sorted(
        [{"n": 1}, {"n": 3}, {"x": "1", "y": "2"}, {"x": "4", "y": "5"}], key=lambda v: json.dumps(v, sort_keys=True))
    # the bad last line's offset was committed with it: the next run reads nothing, skips nothing
    assert committed(backend)["a.jsonl"]["position"] == (d / "a.jsonl").stat().st_size
    again = run_source(config(d, errors_tolerance="all"), sqlite_url)
    assert (again.records, again.skipped) == (0, 0)


@pytest.mark.parametrize("boundary", ["poll", "connector"])
def test_a_bad_line_alone_is_skipped_under_both_boundaries(tmp_path: Path, sqlite_url: str, backend: Backend,
                                                          boundary: str) -> None:
    d = tmp_path / "in"
    d.mkdir()
    (d / "a.jsonl").write_text("{bad\n")
    result = run_source(config(d, errors_tolerance="all", transaction_boundary=boundary), sqlite_url)
    assert (result.records, result.skipped) == (0, 1)
    assert topic_values(backend) == []
    assert committed(backend)["a.jsonl"]["position"] == 5


def test_bad_line_under_tolerance_none_names_file_and_line_and_commits_nothing_after(
        tmp_path: Path, sqlite_url: str, backend: Backend) -> None:
    d = tmp_path / "in"
    d.mkdir()
    (d / "a.jsonl").write_text('{"n": 1}\n{"n": oops}\n{"n": 3}\n')
    with pytest.raises(DataError, match=r"a\.jsonl: line 2: malformed JSON") as info:
        run_source(config(d, transforms="tag", transforms_tag_type="InsertField$Value",
                          **{"transforms.tag.static.field": "src", "transforms.tag.static.value": "files"}),
                   sqlite_url)
    assert "poll() of the source task" in str(info.value)
    assert topic_values(backend) == [{"n": 1, "src": "files"}]
    assert committed(backend)["a.jsonl"]["line"] == 1


def test_last_line_without_newline_is_read_once_the_file_is_final(tmp_path: Path, sqlite_url: str,
                                                                   backend: Backend) -> None:
    d = tmp_path / "in"
    d.mkdir()
    path = d / "a.jsonl"
    path.write_text('{"n": 1}\n{"n": 2}')
    # just written: not final under the default file.final.ms (5 s), the unterminated line waits
    assert run_source(config(d), sqlite_url).records == 1
    assert committed(backend)["a.jsonl"] == {"position": 9, "line": 1, "done": False}
    # -1: never final
    old = time.time() - 3600
    os.utime(path, (old, old))
    assert run_source(config(d, file_final_ms="-1"), sqlite_url).records == 0
    # unchanged for an hour: final, its last line is read and the file is done
    assert run_source(config(d), sqlite_url).records == 1
    assert topic_values(backend) == [{"n": 1}, {"n": 2}]
    size = path.stat().st_size
    assert committed(backend)["a.jsonl"] == {"position": size, "line": 2, "done": True}
    assert run_source(config(d), sqlite_url).records == 0


def test_final_tail_of_csv_and_zero_means_at_once(tmp_path: Path, sqlite_url: str, backend: Backend) -> None:
    d = tmp_path / "in"
    d.mkdir()
    (d / "p.csv").write_text("id,name\n1,ann\n2,bob")
    assert run_source(config(d, file_final_ms="0"), sqlite_url).records == 2
    assert topic_values(backend) == [{"id": "1", "name": "ann"}, {"id": "2", "name": "bob"}]
    assert committed(backend)["p.csv"]["done"] is True


def test_a_tail_that_becomes_final_during_the_run_is_read_in_the_same_run(tmp_path: Path, sqlite_url: str,
                                                                         backend: Backend) -> None:
    d = tmp_path / "in"
    d.mkdir()
    (d / "a.jsonl").write_text('{"n": 1}\n{"n": 2}')
    result = run_source(config(d, file_final_ms="300", poll_idle_timeout_ms="3000"), sqlite_url, max_seconds=30)
    assert result.records == 2
    assert committed(backend)["a.jsonl"]["done"] is True


def test_bad_unterminated_last_line_of_a_final_file_is_skipped(tmp_path: Path, sqlite_url: str,
                                                                backend: Backend) -> None:
    d = tmp_path / "in"
    d.mkdir()
    (d / "a.jsonl").write_text('{"n": 1}\n{"n": ')
    result = run_source(config(d, file_final_ms="0", errors_tolerance="all"), sqlite_url)
    assert (result.records, result.skipped) == (1, 1)
    assert committed(backend)["a.jsonl"]["position"] == (d / "a.jsonl").stat().st_size
