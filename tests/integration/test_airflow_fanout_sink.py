"""``fan_out_sink`` under ``airflow dags test`` (real Airflow, the embedded SQLite backend): a source fanned out over
two mapped instances, then a FileSink fanned out with ``tasks.max`` 8 over the 6 partitions the source wrote
(``tests/support/dag_files/pyconnect_test_fanout_sink.py``): eight mapped instances, each consuming only the
partitions its plan gave it (two get none and end empty); every committed record once in the destination; the
merged result's ranges are the source's. Beside it a ParquetSink fanned out over two instances, whose task configs
carry a secret (``storage.options``): its plan XCom holds a placeholder, the log never the secret, and each record is
once in the lake (the instances got the secret back)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.support.airflow_env import AirflowEnv, conn_env, shared_airflow_env

pytestmark = pytest.mark.airflow

PARTITIONS = 6


@pytest.fixture(scope="module")
def af(tmp_path_factory: pytest.TempPathFactory) -> AirflowEnv:
    return shared_airflow_env(tmp_path_factory)


def test_a_fanned_out_file_sink_puts_each_record_once(af: AirflowEnv, tmp_path: Path) -> None:
    from connect_runtime import ranges as ranges_mod
    from connect_runtime.backends import open_backend
    from connect_runtime.connectors.files import committed_files
    from connect_runtime.connectors.lake import committed_files as lake_files

    url = f"sqlite:///{tmp_path / 'fan.db'}"
    with open_backend(url) as be:
        be.create_topics({"fan-sink-events": PARTITIONS})
    out, directory, lake = tmp_path / "out.json", tmp_path / "files", tmp_path / "lake"
    env = {**conn_env("pyconnect_test", url), "PYCONNECT_TEST_OUT": str(out), "PYCONNECT_TEST_DIR": str(directory),
           "PYCONNECT_TEST_SINK_TASKS": "8", "PYCONNECT_TEST_LAKE": str(lake)}
    run = af.airflow("dags", "test", "pyconnect_test_fanout_sink", "2026-03-06", extra_env=env, timeout=400)
    assert "fan-secret-456" not in run.stdout + run.stderr
    got = json.loads(out.read_text())
    source, sink, plan = got["source"], got["sink"], got["plan"]
    assert source["records"] == 1200 and sink["records"] == 1200 and sink["tasks"] == 8
    assert "fan-secret-456" not in json.dumps(got)
    lake_configs = [t["config"]["storage.options"] for t in got["lake_plan"]["tasks"]]
    assert lake_configs == ["[hidden:storage.options]"] * 2, "the plan carries the secret field, hidden"
    owned = sorted(p[1] for t in plan["tasks"] for p in t["partitions"])
    assert owned == list(range(PARTITIONS)) and [len(t["partitions"]) for t in plan["tasks"]][6:] == [0, 0]
    read = ranges_mod.parse(sink["ranges"])["fan-sink-events"]
    written = ranges_mod.parse(source["ranges"])["fan-sink-events"]
    assert read == {p: [(0, max(e for _s, e in spans))]
                    for p, spans in written.items()}, "the sink read what was written"
    lines = [json.loads(line) for p in range(PARTITIONS) for f in committed_files(directory, "fan-sink-events", p)
             for line in f.read_text().splitlines() if line]
    assert sorted(v["id"] for v in lines) == list(range(1200)), "each generated record once in the destination"
    assert got["lake"]["records"] == 1200 and ranges_mod.parse(got["lake"]["ranges"]) == ranges_mod.parse(sink["ranges"])
    ids = [i for p in range(PARTITIONS) for f in lake_files(str(lake), "fan-sink-events", p)
           for i in pq.read_table(f, columns=["id"]).column("id").to_pylist()]
    assert sorted(ids) == list(range(1200)), "each generated record once in the lake"
