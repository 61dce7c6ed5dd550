"""A source run that committed nothing says why (``SourceRunResult.empty``): no input where it looked (naming the
folder or table), already committed (a rerun), filtered, or unknown (a connector that does not say). Real
``run_source`` runs on a SQLite backend file; the SQL source reads a SQLite database."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from connect_runtime.api import ConfigDef, NothingRead, SourceConnector, SourceRecord, SourceTask
from connect_runtime.runtime.source import run_source

FAST = {"poll.idle.timeout.ms": "100", "directory.scan.interval.ms": "0"}
LEDGER = {"dag_id": "d", "task_id": "t", "map_index": -1, "interval": "2026-11-28T00:00:00+00:00/2026-11-29"}


def directory_config(folder: Path, **extra: str) -> dict[str, str]:
    return {"name": "files", "connector.class": "connect_runtime.connectors.files.DirectorySource",
            "directory": str(folder), "topic": "lines", "pattern": "*.jsonl", **FAST, **extra}


def test_an_empty_folder_is_no_input_naming_the_folder_and_pattern(tmp_path: Path, sqlite_url: str) -> None:
    folder = tmp_path / "2026-11-28"
    folder.mkdir()
    (folder / "notes.txt").write_text("not matched\n")
    result = run_source(directory_config(folder), sqlite_url, ledger_key=LEDGER)
    assert result.records == 0
    empty = result.to_dict()["empty"]
    assert empty["reason"] == "no_input"
    assert str(folder) in empty["message"] and "'*.jsonl'" in empty["message"], empty
    assert "committed before" not in empty["message"]
    assert empty["looked_at"] == [{"task": "connector", "where": str(folder), "reason": "no_input",
                                   "detail": "no file matches pattern '*.jsonl'"}]


def test_a_rerun_of_the_interval_says_committed_before(tmp_path: Path, sqlite_url: str) -> None:
    (tmp_path / "a.jsonl").write_text('{"n": 1}\n{"n": 2}\n')
    first = run_source(directory_config(tmp_path), sqlite_url, ledger_key=LEDGER)
    assert first.records == 2 and first.empty is None and first.to_dict()["empty"] is None
    again = run_source(directory_config(tmp_path), sqlite_url, ledger_key=LEDGER)
    assert again.records == 0
    assert again.empty is not None and again.empty["reason"] == "committed_before"
    assert again.empty["message"] == "the interval was committed before (it holds 2 records)"
    # another interval over the same folder: the input is there, every file was read before
    other = run_source(directory_config(tmp_path), sqlite_url, ledger_key={**LEDGER, "interval": "next"})
    assert other.empty is not None and other.empty["reason"] == "committed_before"
    assert "1 file matching '*.jsonl', each read to its end by an earlier run" in other.empty["message"]
    assert str(tmp_path) in other.empty["message"]


def test_every_record_filtered_is_filtered_not_empty(tmp_path: Path, sqlite_url: str) -> None:
    (tmp_path / "a.jsonl").write_text('{"n": 1}\n')
    config = directory_config(tmp_path, **{"transforms": "drop", "transforms.drop.type":
                                           "connect_runtime.transforms.Filter"})
    result = run_source(config, sqlite_url)
    assert result.records == 0 and result.filtered == 1
    assert result.empty is not None and result.empty["reason"] == "filtered", result.empty


def test_an_empty_sql_table_names_the_table(tmp_path: Path, sqlite_url: str) -> None:
    db = tmp_path / "shop.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, ts TIMESTAMP)")
    config = {"name": "sql", "connector.class": "connect_runtime.connectors.sql.SqlSource",
              "connection.url": f"sqlite:///{db}", "mode": "incrementing", "incrementing.column.name": "id",
              "topic.prefix": "shop-", "poll.idle.timeout.ms": "100"}
    result = run_source(config, sqlite_url)
    assert result.empty is not None and result.empty["reason"] == "no_input", result.empty
    assert f"orders on sqlite:///{db}" in result.empty["message"] and "no row" in result.empty["message"]
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO orders (id) VALUES (1)")
    assert run_source(config, sqlite_url).records == 1
    again = run_source(config, sqlite_url)
    assert again.empty is not None and again.empty["reason"] == "committed_before", again.empty
    assert "no row past the committed offsets" in again.empty["message"]
    # no table left to read (every one excluded): the connector says so, no task ran
    none = run_source({**config, "name": "sql2", "table.exclude.list": "orders"}, sqlite_url)
    assert none.empty is not None and none.empty["reason"] == "no_input", none.empty
    assert none.empty["looked_at"][0]["task"] == "connector", none.empty
    assert "every table of the default schema" in none.empty["message"] and "no table matched" in none.empty["message"]


class SilentSource(SourceConnector):
    """A connector that says nothing about where it looked."""

    def config_def(self) -> ConfigDef:
        return ConfigDef()

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def task_class(self) -> type:
        return SilentTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [self.props]


class SilentTask(SourceTask):
    def start(self, props: Mapping[str, str]) -> None:
        pass

    def poll(self) -> list[SourceRecord] | None:
        return None


class BrokenReportTask(SilentTask):
    def nothing_read(self) -> NothingRead | None:
        raise RuntimeError("cannot say")


class BrokenReportSource(SilentSource):
    def task_class(self) -> type:
        return BrokenReportTask


@pytest.mark.parametrize("cls", [SilentSource, BrokenReportSource])
def test_a_source_that_does_not_say_is_unknown_and_the_run_succeeds(cls: type, sqlite_url: str) -> None:
    config = {"name": "silent", "connector.class": f"{__name__}.{cls.__name__}", "poll.idle.timeout.ms": "100"}
    result = run_source(config, sqlite_url)
    assert result.empty is not None and result.empty["reason"] == "unknown", result.empty
    assert "does not say where it looked" in result.empty["message"]


def test_nothing_read_refuses_an_unknown_reason() -> None:
    with pytest.raises(ValueError, match="no_input"):
        NothingRead("/x", "missing")
    assert NothingRead("/x").message() == "no input found at /x"
    assert NothingRead("/x", "committed_before", "2 files").message() == "everything at /x was committed before (2 files)"


def test_datagen_with_nothing_left_says_committed_before(sqlite_url: str) -> None:
    config: dict[str, Any] = {"name": "gen", "connector.class": "connect_runtime.connectors.datagen.DataGenSource",
                              "topic": "g", "max.records": "3", "poll.idle.timeout.ms": "100"}
    assert run_source(config, sqlite_url).records == 3
    again = run_source(config, sqlite_url)
    assert again.empty is not None and again.empty["reason"] == "committed_before", again.empty
    zero = run_source({**config, "name": "gen0", "max.records": "0"}, sqlite_url)
    assert zero.empty is not None and zero.empty["reason"] == "no_input", zero.empty
