"""The same ``pyconnect`` session on both backends (a fresh SQLite file; a fresh Apache Kafka broker):
source run, topics, KIP-875 offsets of a source, of a FileSink (in its destination) and of a sink group."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from connect_runtime.connectors.files import committed_files

PYCONNECT = str(Path(sys.executable).with_name("pyconnect"))


def cli(url: str, *args: str) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYCONNECT_BACKEND"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])  # the test connectors (tests.support.sink_helpers)
    p = subprocess.run([PYCONNECT, "--backend", url, *args], capture_output=True, text=True, timeout=180, env=env)
    return p.returncode, p.stdout, p.stderr


def ok(url: str, *args: str) -> Any:
    rc, out, err = cli(url, *args)
    assert rc == 0, (args, err)
    lines = out.splitlines()
    return json.loads(out) if len(lines) == 1 else [json.loads(line) for line in lines]


def test_cli_session_on_each_backend(tmp_path: Path, any_backend_url: str) -> None:
    url = any_backend_url
    src = tmp_path / "gen.json"
    src.write_text(json.dumps({"name": "clisrc", "connector.class": "connect_runtime.connectors.datagen.DataGenSource",
                               "topic": "cli-events", "max.records": 25, "poll.idle.timeout.ms": 300}))
    result = ok(url, "run", str(src))
    assert result["records"] == 25 and result["ranges"] == {"cli-events": {"0": [0, 25]}}

    topics = ok(url, "topics", "list")
    assert {"topic": "cli-events", "partitions": 1} in (topics if isinstance(topics, list) else [topics])
    recs = ok(url, "topics", "read", "cli-events", "--from-beginning", "--max", "4")
    assert [r["value"]["id"] for r in recs] == [0, 1, 2, 3]

    assert ok(url, "offsets", "get", "clisrc") == {"offsets": [{"partition": {"task": 0}, "offset": {"position": 25}}]}
    ok(url, "offsets", "set", "clisrc", "--partition", '{"task": 0}', "--offset", '{"position": 20}')
    assert ok(url, "run", str(src))["records"] == 5

    (tmp_path / "result.json").write_text(json.dumps(result))
    sink = tmp_path / "sink.properties"
    sink.write_text(f"name=clisink\nconnector.class=connect_runtime.connectors.files.FileSink\ntopics=cli-events\n"
                    f"directory={tmp_path / 'out'}\n")
    assert ok(url, "run", str(sink), "--until", f"@{tmp_path / 'result.json'}")["records"] == 25
    files = committed_files(tmp_path / "out", "cli-events", 0)
    assert [json.loads(v)["id"] for f in files for v in f.read_text().splitlines()] == list(range(25))

    # the FileSink keeps its offsets in its destination: read and moved there, through its config file
    part = '{"kafka_topic": "cli-events", "kafka_partition": 0}'
    entry = {"partition": {"kafka_topic": "cli-events", "kafka_partition": 0}, "offset": {"kafka_offset": 25}}
    assert ok(url, "offsets", "get", str(sink))["offsets"] == [entry]
    assert ok(url, "offsets", "get", "clisink")["offsets"] == [entry]  # as its last run recorded them
    rc, _, err = cli(url, "offsets", "set", "clisink", "--partition", part, "--offset", '{"kafka_offset": 30}')
    assert rc == 1 and "keeps its offsets in its destination" in err
    assert ok(url, "offsets", "set", str(sink), "--partition", part, "--offset", '{"kafka_offset": 30}')["in"] \
        == "destination"
    assert ok(url, "offsets", "get", str(sink))["offsets"][0]["offset"] == {"kafka_offset": 30}

    # a sink whose offsets are its consumer group's: KIP-875 on the group
    group = tmp_path / "group.properties"
    group.write_text(f"name=cligroup\nconnector.class=tests.support.sink_helpers.RecordingSinkConnector\ntopics=cli-events\n"
                     f"log.path={tmp_path / 'calls.jsonl'}\n")
    assert ok(url, "run", str(group), "--until", f"@{tmp_path / 'result.json'}")["records"] == 25
    ok(url, "offsets", "set", "cligroup", "--partition", part, "--offset", '{"kafka_offset": 9}')
    assert ok(url, "offsets", "get", "cligroup") == {"offsets": [
        {"partition": {"kafka_topic": "cli-events", "kafka_partition": 0}, "offset": {"kafka_offset": 9}}]}
    reset = ok(url, "offsets", "reset", "cligroup")
    assert reset["sink_partitions_reset"] == 1
    assert ok(url, "offsets", "get", "cligroup")["offsets"][0]["offset"] == {"kafka_offset": 0}
    assert ok(url, "offsets", "reset", "clisrc")["source_partitions_reset"] == 1
    assert ok(url, "offsets", "get", "clisrc") == {"offsets": []}
