"""``pyconnect`` in real subprocesses against a real SQLite backend file: exit codes, one-line errors,
runs of sources and sinks, offsets (KIP-875 style) and topics."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from connect_runtime.backends import open_backend
from connect_runtime.connectors.files import committed_files

PYCONNECT = str(Path(sys.executable).with_name("pyconnect"))
REPO = Path(__file__).resolve().parents[2]


class Result:
    def __init__(self, proc: subprocess.CompletedProcess[str]) -> None:
        self.rc = proc.returncode
        self.out = proc.stdout
        self.err = proc.stderr

    def json(self) -> Any:
        return json.loads(self.out)

    def json_lines(self) -> list[Any]:
        return [json.loads(line) for line in self.out.splitlines()]


def without_write_rights(cmd: list[str]) -> list[str]:
    """``cmd`` run so that file permission bits bind it (root normally bypasses them)."""
    if os.geteuid() != 0:
        return cmd
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root and setpriv is missing: cannot run a process that file modes bind")
    caps = "-dac_override,-dac_read_search,-fowner"
    return [setpriv, "--bounding-set", caps, "--inh-caps", caps, *cmd]


def cli(*args: str, url: str | None = None, env: dict[str, str] | None = None, timeout: float = 120,
        prefix: list[str] | None = None) -> Result:
    cmd = (prefix or []) + [PYCONNECT] + (["--backend", url] if url else []) + list(args)
    full_env = {k: v for k, v in os.environ.items() if k != "PYCONNECT_BACKEND"}
    full_env.update(env or {})
    return Result(subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=full_env, cwd=REPO))


def assert_one_line_error(r: Result, rc: int, *fragments: str) -> None:
    assert r.rc == rc, (r.rc, r.out, r.err)
    assert r.err.startswith("error: "), r.err
    assert r.err.count("\n") == 1, r.err
    assert "Traceback" not in r.err
    for f in fragments:
        assert f in r.err, r.err


def datagen(tmp_path: Path, n: int = 20, **extra: str) -> Path:
    p = tmp_path / "gen.properties"
    lines = ["# a datagen source", "name=gen", "connector.class=connect_runtime.connectors.datagen.DataGenSource",
             "topic=events", f"max.records={n}", "poll.idle.timeout.ms=200"]
    lines += [f"{k}={v}" for k, v in extra.items()]
    p.write_text("\n".join(lines) + "\n")
    return p


def test_source_run_then_topics_and_offsets(tmp_path: Path, sqlite_url: str) -> None:
    r = cli("run", str(datagen(tmp_path, 20)), url=sqlite_url)
    assert r.rc == 0, r.err
    result = r.json()
    assert result["records"] == 20
    assert result["ranges"] == {"events": {"0": [0, 20]}}

    r = cli("topics", "list", url=sqlite_url)
    assert r.rc == 0 and {"topic": "events", "partitions": 1} in r.json_lines()

    r = cli("topics", "read", "events", "--from-beginning", "--max", "3", url=sqlite_url)
    assert r.rc == 0, r.err
    recs = r.json_lines()
    assert [(x["topic"], x["partition"], x["offset"]) for x in recs] == [("events", 0, i) for i in range(3)]
    assert [x["value"]["id"] for x in recs] == [0, 1, 2]
    assert all(x["key"] is None for x in recs)

    r = cli("topics", "read", "events", "--max", "2", "--partition", "0", url=sqlite_url)
    assert [x["offset"] for x in r.json_lines()] == [18, 19]

    r = cli("offsets", "get", "gen", url=sqlite_url)
    assert r.rc == 0, r.err
    got = r.json()
    assert got == {"offsets": [{"partition": {"task": 0}, "offset": {"position": 20}}]}  # KIP-875's shape
    assert cli("offsets", "get", str(tmp_path / "gen.properties"), url=sqlite_url).json() == got  # by config file

    # KIP-875: move the source offset back, and the next run re-generates from there
    r = cli("offsets", "set", "gen", "--partition", '{"task": 0}', "--offset", '{"position": 15}', url=sqlite_url)
    assert r.rc == 0, r.err
    assert cli("offsets", "get", "gen", url=sqlite_url).json()["offsets"][0]["offset"] == {"position": 15}
    assert cli("run", str(datagen(tmp_path, 20)), url=sqlite_url).json()["records"] == 5

    r = cli("offsets", "reset", "gen", url=sqlite_url)
    assert r.rc == 0 and r.json()["source_partitions_reset"] == 1
    assert cli("offsets", "get", "gen", url=sqlite_url).json() == {"offsets": []}
    assert cli("run", str(datagen(tmp_path, 20)), url=sqlite_url).json()["records"] == 20


def test_at_least_once_source_run(tmp_path: Path, sqlite_url: str) -> None:
    r = cli("run", str(datagen(tmp_path, 12)), "--at-least-once", "--max-records", "10", url=sqlite_url)
    assert r.rc == 0, r.err
    assert r.json()["records"] == 10
    assert cli("run", str(datagen(tmp_path, 12)), url=sqlite_url).json()["records"] == 2


def test_backend_from_environment(tmp_path: Path, sqlite_url: str) -> None:
    r = cli("run", str(datagen(tmp_path, 3)), env={"PYCONNECT_BACKEND": sqlite_url})
    assert r.rc == 0, r.err
    assert Path(sqlite_url.removeprefix("sqlite:///")).exists()
    assert cli("topics", "list", url=sqlite_url).json_lines() == [{"topic": "events", "partitions": 1}]


def test_sink_run_until_a_source_result_and_group_offsets(tmp_path: Path, sqlite_url: str) -> None:
    r = cli("run", str(datagen(tmp_path, 30)), url=sqlite_url)
    (tmp_path / "result.json").write_text(r.out)
    sink = tmp_path / "sink.json"
    sink.write_text(json.dumps({"name": "archive", "connector.class": "connect_runtime.connectors.files.FileSink",
                                "topics": ["events"], "directory": str(tmp_path / "out")}))
    r = cli("run", str(sink), "--until", f"@{tmp_path / 'result.json'}", url=sqlite_url)
    assert r.rc == 0, r.err
    assert r.json()["records"] == 30
    lines = [line for f in committed_files(tmp_path / "out", "events", 0) for line in f.read_text().splitlines()]
    assert [json.loads(line)["id"] for line in lines] == list(range(30))

    # the FileSink keeps its offsets in its destination: `offsets get` shows what its last run recorded
    # there, and with its config file reads them there; they are changed only there, through the connector
    entry = [{"partition": {"kafka_topic": "events", "kafka_partition": 0}, "offset": {"kafka_offset": 30}}]
    got = cli("offsets", "get", "archive", url=sqlite_url).json()
    assert (got["offsets"], got["managed_by"], got["where"]) == (entry, "destination",
                                                                 f"FileSink manifests and file names under {tmp_path / 'out'}")
    assert isinstance(got["as_of"], int)
    assert cli("offsets", "get", str(sink), url=sqlite_url).json()["offsets"] == entry
    part = '{"kafka_topic": "events", "kafka_partition": 0}'
    r = cli("offsets", "set", "archive", "--partition", part, "--offset", '{"kafka_offset": 40}', url=sqlite_url)
    assert_one_line_error(r, 1, "keeps its offsets in its destination", "pass the connector's config",
                          "nothing was changed")
    r = cli("offsets", "set", str(sink), "--partition", part, "--offset", '{"kafka_offset": 7}', url=sqlite_url)
    assert_one_line_error(r, 1, "move back to offset 7", "events+0+")  # its records are in a file: refused
    r = cli("offsets", "set", str(sink), "--partition", part, "--offset", '{"kafka_offset": 40}', url=sqlite_url)
    assert r.rc == 0, r.err
    assert r.json()["in"] == "destination"
    assert cli("offsets", "get", str(sink), url=sqlite_url).json()["offsets"][0]["offset"] == {"kafka_offset": 40}
    assert cli("offsets", "get", "archive", url=sqlite_url).json()["offsets"][0]["offset"] == {"kafka_offset": 40}
    assert_one_line_error(cli("offsets", "reset", str(sink), url=sqlite_url), 1, "to reset events-0")
    for f in committed_files(tmp_path / "out", "events", 0):
        f.unlink()  # the user removes the data, then resets: the next run writes the topic again
    r = cli("offsets", "reset", str(sink), url=sqlite_url)
    assert r.rc == 0 and r.json()["sink_partitions_reset"] == 1, r.err
    assert cli("offsets", "get", str(sink), url=sqlite_url).json()["offsets"] == []
    r = cli("run", str(sink), url=sqlite_url)
    assert r.rc == 0 and r.json()["records"] == 30, r.err
    lines = [line for f in committed_files(tmp_path / "out", "events", 0) for line in f.read_text().splitlines()]
    assert [json.loads(line)["id"] for line in lines] == list(range(30))


def test_validate(tmp_path: Path) -> None:
    good = tmp_path / "good.properties"
    good.write_text("name=gen\nconnector.class=connect_runtime.connectors.datagen.DataGenSource\ntopic=t\n"
                    "db.password=hunter2\n")
    r = cli("validate", str(good))
    assert (r.rc, r.out.splitlines()[0]) == (0, "OK"), r.err
    r = cli("-v", "validate", str(good))
    assert r.rc == 0 and "hunter2" not in r.out + r.err and "[hidden]" in r.out

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"name": "files", "connector.class": "connect_runtime.connectors.files.DirectorySource",
                               "directory": str(tmp_path / "missing"), "batch.size": "lots", "tasks.max": 0}))
    r = cli("validate", str(bad))
    assert r.rc == 1
    assert r.out.splitlines()[0] == "invalid: 4 fields"
    for field in ("directory", "batch.size", "tasks.max", "topic"):
        assert f"  {field}: " in r.out


def test_progress_lines_on_a_long_run(tmp_path: Path, sqlite_url: str) -> None:
    """The runtime's progress lines (every progress.interval.ms) show without -v: at most one per interval. The
    run lasts at least 30 polls of 80 ms (poll.delay.ms), more than one interval, so there is at least one."""
    cfg = datagen(tmp_path, 60, **{"batch.size": "2", "poll.delay.ms": "80", "progress.interval.ms": "500"})
    t0 = time.monotonic()
    r = cli("run", str(cfg), url=sqlite_url)
    elapsed = time.monotonic() - t0  # an upper bound of the run's own duration
    assert r.rc == 0, r.err
    assert r.json()["records"] == 60
    progress = [line for line in r.err.splitlines() if line.startswith("progress: ")]
    assert 1 <= len(progress) <= elapsed / 0.5 + 1, (elapsed, r.err)
    for line in progress:
        assert re.fullmatch(r"progress: source connector 'gen': \d+ records in [\d.]+ s \([\d,]+ records/s\); "
                            r"\d+ committed", line), line


def test_short_run_prints_no_progress(tmp_path: Path, sqlite_url: str) -> None:
    r = cli("run", str(datagen(tmp_path, 5)), url=sqlite_url)
    assert r.rc == 0 and r.err == ""


def test_failures_are_one_line_errors(tmp_path: Path, sqlite_url: str) -> None:
    assert_one_line_error(cli("run", str(tmp_path / "nope.properties"), url=sqlite_url), 1,
                          "nope.properties: cannot read config file")
    bad_props = tmp_path / "bad.properties"
    bad_props.write_text("name=x\nv=\\uZZZZ\n")
    assert_one_line_error(cli("validate", str(bad_props)), 1, "bad.properties:2:")
    assert_one_line_error(cli("--backend", "mysql://x", "topics", "list"), 1, "backend")
    open_backend(sqlite_url).close()  # an empty database
    assert_one_line_error(cli("topics", "read", "missing", url=sqlite_url), 1, "topic 'missing' does not exist")
    assert_one_line_error(cli("offsets", "set", "c", "--partition", "[1", "--offset", "{}", url=sqlite_url), 2,
                          "--partition is not valid JSON")

    # a connector failure: the error names the file and line, never a traceback
    d = tmp_path / "in"
    d.mkdir()
    (d / "x.jsonl").write_text('{"ok": 1}\nnot json\n')
    src = tmp_path / "files.properties"
    src.write_text(f"name=files\nconnector.class=connect_runtime.connectors.files.DirectorySource\n"
                   f"directory={d}\ntopic=lines\npoll.idle.timeout.ms=200\n")
    assert_one_line_error(cli("run", str(src), url=sqlite_url), 1, "x.jsonl: line 2: malformed JSON")
    r = cli("--debug", "run", str(src), url=sqlite_url)
    assert r.rc == 1 and "Traceback" in r.err and r.err.rstrip().splitlines()[-1].startswith("error: ")

    # secrets never printed in an error
    secret = tmp_path / "secret.properties"
    secret.write_text("name=gen\nconnector.class=connect_runtime.connectors.datagen.DataGenSource\n"
                      "topic=t\nmax.records=s3cr3t-password\nsasl.password=s3cr3t-password\n")
    r = cli("run", str(secret), url=sqlite_url)
    assert r.rc == 1 and "s3cr3t-password" not in r.err and "[hidden]" in r.err


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    assert_one_line_error(cli("frobnicate"), 2, "invalid choice")
    assert_one_line_error(cli("run"), 2, "config")
    assert_one_line_error(cli("topics", "read", "t", "--max", "x"), 2)
    assert_one_line_error(cli("run", str(datagen(tmp_path)), "--until", "{}"), 2, "--until applies to sink")
    r = cli("--help")
    assert r.rc == 0 and "pyconnect" in r.out


def test_commands_on_an_empty_backend(tmp_path: Path, sqlite_url: str) -> None:
    open_backend(sqlite_url).close()  # a database nothing was written to yet
    r = cli("topics", "list", url=sqlite_url)
    assert r.rc == 0, r.err
    # no connector has run: its offsets are an error, as Kafka Connect's 404 "Connector X not found"
    assert_one_line_error(cli("offsets", "get", "gen", url=sqlite_url), 1, "connector 'gen' not found")


def test_offsets_of_a_connector_that_never_ran(tmp_path: Path, sqlite_url: str) -> None:
    """A name no run registered is an error for get, set and reset (exit 1, nothing written, a did-you-mean for
    a near miss); its config file stands for the connector before its first run (Kafka Connect: a connector
    created STOPPED, KIP-980) and registers it."""
    config = datagen(tmp_path, 20)
    assert cli("run", str(config), url=sqlite_url).rc == 0
    before = cli("offsets", "get", "gen", url=sqlite_url).json()
    part = ["--partition", '{"task": 0}', "--offset", '{"position": 3}']
    for cmd in (["get", "nope"], ["set", "nope", *part], ["reset", "nope"], ["set", "gne", *part]):
        r = cli("offsets", *cmd, url=sqlite_url)
        assert_one_line_error(r, 1, f"connector {cmd[1]!r} not found", "no run of it is registered",
                              "give its config file as CONNECTOR")
        assert r.out == ""
    assert "did you mean 'gen'?" in cli("offsets", "set", "gne", *part, url=sqlite_url).err
    with open_backend(sqlite_url) as be:
        from connect_runtime import admin

        assert {c["name"] for c in admin.list_connectors(be)} == {"gen"}, "nothing registered under the bad names"
        assert admin.source_offsets(be, "nope") == [] and admin.source_offsets(be, "gne") == []
    assert cli("offsets", "get", "gen", url=sqlite_url).json() == before

    # by config file, before its first run: set applies, and the connector exists from then on
    fresh = tmp_path / "fresh.properties"
    fresh.write_text(config.read_text().replace("name=gen", "name=fresh"))
    assert cli("offsets", "get", str(fresh), url=sqlite_url).json() == {"offsets": []}
    r = cli("offsets", "set", str(fresh), *part, url=sqlite_url)
    assert r.rc == 0, r.err
    got = cli("offsets", "get", "fresh", url=sqlite_url)
    assert got.rc == 0, got.err
    assert got.json() == {"offsets": [{"partition": {"task": 0}, "offset": {"position": 3}}]}
    assert cli("offsets", "reset", "fresh", url=sqlite_url).rc == 0


READ_ONLY_COMMANDS = [["topics", "list"], ["topics", "read", "events"], ["offsets", "get", "gen"]]


@pytest.mark.parametrize("cmd", READ_ONLY_COMMANDS)
def test_read_only_commands_on_a_wrong_path_create_nothing(tmp_path: Path, cmd: list[str]) -> None:
    path = tmp_path / "typo" / "sub" / "pyconnect.db"
    r = cli(*cmd, url=f"sqlite:///{path}")
    assert_one_line_error(r, 1, str(path), "no such file", "never creates")
    assert not (tmp_path / "typo").exists()


def test_read_only_commands_inspect_a_read_only_database(tmp_path: Path) -> None:
    """A database file the user may only read, in a folder the user may not write (so SQLite cannot
    create its ``-shm`` file): ``topics list|read`` and ``offsets get`` still work."""
    folder = tmp_path / "ro"
    url = f"sqlite:///{folder / 'pyconnect.db'}"
    assert cli("run", str(datagen(tmp_path, 5)), url=url).rc == 0
    (folder / "pyconnect.db").chmod(0o444)
    folder.chmod(0o555)
    prefix = without_write_rights([])
    try:
        assert sorted(p.name for p in folder.iterdir()) == ["pyconnect.db"]
        listed = cli("topics", "list", url=url, prefix=prefix)
        read = cli("topics", "read", "events", "--from-beginning", url=url, prefix=prefix)
        offsets = cli("offsets", "get", "gen", url=url, prefix=prefix)
        written = cli("run", str(datagen(tmp_path, 10)), url=url, prefix=prefix)
    finally:
        folder.chmod(0o755)
        (folder / "pyconnect.db").chmod(0o644)
    assert listed.rc == 0, listed.err
    assert listed.json_lines() == [{"topic": "events", "partitions": 1}]
    assert read.rc == 0, read.err
    assert [rec["value"]["id"] for rec in read.json_lines()] == [0, 1, 2, 3, 4]
    assert offsets.rc == 0, offsets.err
    assert offsets.json() == {"offsets": [{"partition": {"task": 0}, "offset": {"position": 5}}]}
    assert written.rc == 1 and written.err.startswith("error: "), written.err  # a run still needs write access


def test_run_fails_when_the_database_file_is_deleted_mid_run(tmp_path: Path) -> None:
    """Deleting the SQLite file under a running source: the run must fail naming the file, not exit 0
    saying it committed records that went into an unlinked file."""
    path = tmp_path / "live.db"
    cfg = datagen(tmp_path, 400, **{"batch.size": "2", "poll.delay.ms": "10"})
    cmd = [PYCONNECT, "--backend", f"sqlite:///{path}", "run", str(cfg)]
    env = {k: v for k, v in os.environ.items() if k != "PYCONNECT_BACKEND"}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, cwd=REPO)
    try:
        deadline = time.monotonic() + 60
        committed = 0
        while committed < 10:  # wait (bounded) for the run to have committed a few transactions
            assert time.monotonic() < deadline, "the run committed no records within 60 s"
            assert proc.poll() is None, proc.communicate()
            if path.exists():
                with contextlib.suppress(sqlite3.Error), contextlib.closing(sqlite3.connect(path, timeout=5)) as c:
                    committed = c.execute("SELECT count(*) FROM records").fetchone()[0]
            time.sleep(0.05)
        path.unlink()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 1, (out, err)
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert str(path) in err and "was deleted" in err


def test_validate_fails_on_misspelt_keys_and_lists_other_unknown_keys_as_warnings(tmp_path: Path) -> None:
    cfg = tmp_path / "typo.properties"
    cfg.write_text("name=gen\nconnector.class=connect_runtime.connectors.datagen.DataGenSource\ntopic=t\n"
                   "exactly.once.suport=required\nmax.record=5\ntransforms=a\n"
                   "transforms.a.type=org.apache.kafka.connect.transforms.InsertField$Value\n"
                   "transforms.a.static.field=f\ntransforms.a.static.value=v\ntransforms.b.type=x\n"
                   "value.converter.schemas.enable=false\nsasl.password=hunter2\n")
    r = cli("validate", str(cfg))
    assert r.rc == 1, (r.out, r.err)  # a misspelling of a defined key is an error (issue 25)
    lines = r.out.splitlines()
    assert lines[0] == "invalid: 2 fields", r.out
    errors = "\n".join(line for line in lines if line.startswith("  ") and not line.startswith("  warning: "))
    assert "exactly.once.suport: " in errors and "did you mean 'exactly.once.support'?" in errors
    assert "max.record: " in errors and "did you mean 'max.records'?" in errors
    warnings = [line for line in lines if line.startswith("  warning: ")]
    assert len(warnings) == 2, r.out  # unknown, not close to a defined key: passed on, as Kafka Connect does
    text = "\n".join(warnings)
    assert "'transforms.b.type'" in text and "not an alias listed in transforms" in text
    assert "'sasl.password'" in text and "hunter2" not in r.out + r.err
    ok = tmp_path / "ok.properties"
    ok.write_text("name=gen\nconnector.class=connect_runtime.connectors.datagen.DataGenSource\ntopic=t\n"
                  "my.own.key=1\n")
    r = cli("validate", str(ok))
    assert r.rc == 0 and r.out.splitlines()[0] == "OK", r.out
    assert "  warning: unknown config key 'my.own.key' is ignored" in r.out
    bad = tmp_path / "bad.properties"
    bad.write_text("name=gen\nconnector.class=connect_runtime.connectors.datagen.DataGenSource\n"
                   "tasks.max=0\ntopik=t\n")
    r = cli("validate", str(bad))
    assert r.rc == 1 and r.out.splitlines()[0] == "invalid: 3 fields", r.out  # tasks.max, topic, topik
    assert "  topik: unknown config key 'topik': did you mean 'topic'?" in r.out


def test_offsets_of_a_connector_with_its_own_store_and_refused_while_it_runs(tmp_path: Path) -> None:
    """``offsets get NAME`` finds a connector's own offsets store through the registry (KIP-618); ``set`` and
    ``reset`` are refused while a run holds the connector (KIP-875), and nothing is changed by the refusal.

    The refusals count only when the run was still alive after both (checked after them): a run that ended first
    (a fast machine, or CLI start-ups slow under load) proves nothing, so the attempt is repeated on a fresh store
    with four times the records, at most five times."""
    env = {k: v for k, v in os.environ.items() if k != "PYCONNECT_BACKEND"}
    n = 400
    for attempt in range(5):
        sqlite_url = f"sqlite:///{tmp_path / f'attempt{attempt}.db'}"
        cfg = datagen(tmp_path, n, **{"offsets.storage.topic": "gen-own-offsets", "batch.size": "2",
                                      "poll.delay.ms": "20"})
        proc = subprocess.Popen([PYCONNECT, "--backend", sqlite_url, "run", str(cfg)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
        try:
            deadline = time.monotonic() + 60
            while True:  # wait (bounded) until the run has committed something
                got = cli("offsets", "get", "gen", url=sqlite_url)
                if got.rc == 0 and got.json()["offsets"]:
                    break
                assert proc.poll() is None and time.monotonic() < deadline, ("no offsets committed", got.err)
                time.sleep(0.2)
            refused = cli("offsets", "set", "gen", "--partition", '{"task": 0}', "--offset", '{"position": 0}',
                          url=sqlite_url)
            reset = cli("offsets", "reset", "gen", url=sqlite_url)
            landed = proc.poll() is None  # the run outlived both refusals: they were made while it ran
            out, err = proc.communicate(timeout=600)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if landed:
            break
        n *= 4
    else:
        raise AssertionError(f"the run ended before the CLI's refusals five times, the last with {n // 4} records")
    assert_one_line_error(refused, 1, "gen", "running")
    assert_one_line_error(reset, 1, "gen", "running")
    assert proc.returncode == 0, err
    assert json.loads(out)["records"] == n  # the refused reset changed nothing under the run
    got = cli("offsets", "get", "gen", url=sqlite_url).json()
    assert got == {"offsets": [{"partition": {"task": 0}, "offset": {"position": n}}]}
    from connect_runtime.runtime.offsets import connector_offsets

    with contextlib.closing(open_backend(sqlite_url)) as be:  # the run committed to its own store
        own = be.offset_store("gen-own-offsets")
        try:
            assert connector_offsets(own, "gen") == [({"task": 0}, {"position": n})]
        finally:
            own.close()
    # once idle, a reset through the CLI reaches the connector's own store: the next run starts over
    assert cli("offsets", "reset", "gen", url=sqlite_url).json()["source_partitions_reset"] == 1
    assert cli("offsets", "get", "gen", url=sqlite_url).json() == {"offsets": []}
    again = cli("run", str(datagen(tmp_path, 400, **{"offsets.storage.topic": "gen-own-offsets"})), url=sqlite_url)
    assert again.json()["records"] == 400
