"""DirectorySource exactly-once across crashes: ``pyconnect run files.properties`` is SIGKILLed
mid-run (a real subprocess, killed on observed progress at a random point of its work), restarted, killed again, then run to the end: the topic holds every line
of every file exactly once, and every file's committed offset says it is done at its full size."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

from connect_runtime.api import TopicPartition
from connect_runtime.backends import open_backend
from connect_runtime.runtime.offsets import connector_offsets
from tests.support.kills import kill_loop, run_killed_on_progress

PYCONNECT = str(Path(sys.executable).with_name("pyconnect"))


def topic_end(url: str) -> int:
    with open_backend(url) as backend:
        if "lines" not in backend.list_topics():
            return 0
        consumer = backend.consumer(None)
        try:
            return consumer.end_offsets([TopicPartition("lines", 0)], 10)[TopicPartition("lines", 0)]
        finally:
            consumer.close()


def test_directory_source_via_cli_is_exactly_once_across_sigkills(tmp_path: Path, sqlite_url: str) -> None:
    d = tmp_path / "in"
    d.mkdir()
    files = {"a.jsonl": 30_000, "b.jsonl": 20_000, "c.csv": 25_000}
    for name, n in files.items():
        with open(d / name, "w") as f:
            if name.endswith(".csv"):
                f.write("file,i\n")
                f.writelines(f"{name},{i}\n" for i in range(n))
            else:
                f.writelines(json.dumps({"file": name, "i": i}) + "\n" for i in range(n))
    cfg = tmp_path / "files.properties"
    cfg.write_text(f"name=files\nconnector.class=connect_runtime.connectors.files.DirectorySource\n"
                   f"directory={d}\ntopic=lines\ntasks.max=2\nbatch.size=300\npoll.idle.timeout.ms=300\n")
    rng = random.Random(11)

    def grow() -> None:  # a run ended before its kill: one more file, as big as the three together
        name = f"more-{len(files)}.jsonl"
        files[name] = sum(files.values())
        with open(d / name, "w") as f:
            f.writelines(json.dumps({"file": name, "i": i}) + "\n" for i in range(files[name]))

    # each kill lands mid-run, at a random point of the run's work: the records the topic holds
    # (tests/support/kills.py)
    kill_loop(lambda: run_killed_on_progress([PYCONNECT, "--backend", sqlite_url, "run", str(cfg)],
                                             lambda: topic_end(sqlite_url), sum(files.values()), rng=rng,
                                             what="pyconnect run (DirectorySource)"),
              grow, kills=2, what="pyconnect run (DirectorySource)")
    final = subprocess.run([PYCONNECT, "--backend", sqlite_url, "run", str(cfg)],
                           capture_output=True, text=True, timeout=300)
    assert final.returncode == 0, final.stderr

    with open_backend(sqlite_url) as backend:
        end = topic_end(sqlite_url)
        values = [json.loads(r.value) for r in backend.read_range(TopicPartition("lines", 0), 0, end)]
        store = backend.offset_store()
        try:
            offsets = {p["file"]: o for p, o in connector_offsets(store, "files")}
        finally:
            store.close()
    seen: dict[str, list[int]] = {name: [] for name in files}
    for v in values:
        seen[v["file"]].append(int(v["i"]))
    for name, n in files.items():
        assert seen[name] == list(range(n)), f"{name}: duplicates, gaps or disorder"
        assert offsets[name]["done"] is True
        assert offsets[name]["position"] == (d / name).stat().st_size
