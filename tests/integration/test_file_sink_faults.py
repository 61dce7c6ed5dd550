"""A FileSink whose disk fills up (issue 25, "servers that blink": it failed with a bare ``OSError: [Errno 28]``).

The sink's directory is a small tmpfs of the test's own (root can mount one; elsewhere the test skips saying
why). A run that fills it fails with one error naming the path and that the disk is full; what it committed
before stays a gap-free prefix and no temporary file is left; once there is room again a rerun delivers the
rest exactly once.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from connect_runtime import run_sink
from connect_runtime.api.errors import ConnectError
from connect_runtime.backends import ProducerRecord, open_backend
from connect_runtime.connectors.files import committed_files

N = 20_000  # about 1.3 MB of JSON lines


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    out = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(disk)], capture_output=True,
                         text=True, check=False)
    if out.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {out.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def _ids(directory: Path, topic: str) -> list[int]:
    out: list[int] = []
    for f in committed_files(directory, topic, 0):
        out.extend(json.loads(line)["id"] for line in f.read_bytes().splitlines())
    return out


def test_a_full_disk_fails_the_run_naming_the_path_and_a_rerun_with_room_delivers_the_rest(
        small_disk: Path, sqlite_url: str) -> None:
    topic = "fill"
    with open_backend(sqlite_url) as be:
        be.create_topics({topic: 1})
        p = be.producer()
        try:
            p.send([ProducerRecord(topic, 0, None, json.dumps({"id": i, "pad": "x" * 40}).encode())
                    for i in range(N)])
            p.flush(60)
        finally:
            p.close()
    directory = small_disk / "archive"
    config = {"name": "filler", "connector.class": "connect_runtime.connectors.files.FileSink", "topics": topic,
              "directory": str(directory), "consumer.max.poll.records": "1000", "offset.flush.interval.ms": "0",
              "errors.retry.timeout": "2000"}
    with pytest.raises(ConnectError) as info:
        run_sink(config, sqlite_url, max_seconds=120)
    text = str(info.value)
    assert str(directory) in text and "the disk is full" in text and "ENOSPC" in text, text
    assert len(text) < 2000, "not one clear error"
    ids = _ids(directory, topic)
    assert ids == list(range(len(ids))) and 0 < len(ids) < N, "committed files are not a gap-free prefix"
    left = [p.name for p in directory.rglob("*") if p.name.startswith(".inflight")]
    assert not left, f"temporary files left behind: {left}"

    subprocess.run(["mount", "-o", "remount,size=16m", str(small_disk)], check=True)  # room again
    run_sink(config, sqlite_url, max_seconds=120)
    assert _ids(directory, topic) == list(range(N)), "a record is missing or twice after the rerun"
