"""Ours against Kafka Connect itself, on the same Apache Kafka 4.4.0 broker and the same JSON lines.

The input: ``--records`` compact JSON lines (``{"id":0,"customer":"c-17","amount":12.34,"ts":...}``, about
70 bytes each) in one ``.jsonl`` file. The broker: an Apache Kafka 4.4.0 node this script starts (the tests'
broker from the jars ``scripts/fetch_kafka.sh`` fetched, with ``kafka-server-start.sh``'s JVM options), or
``--bootstrap``. Kafka Connect 4.3.1 (``connect-runtime``, ``connect-json``, ``connect-file`` and a log4j2
binding, ``bench/kafka_connect/pom.xml``) is fetched with Maven (``scripts/fetch_connect_worker.sh``) into a cache outside the work tree the first
time, ``${PYCONNECT_KAFKA_CONNECT_HOME:-~/.cache/airflow-pyconnect/kafka-connect-4.3.1}/libs`` (4.3.1:
``connect-file`` is served at 4.3.1 only, and it does not load on a 4.4.0 worker), and run as its scripts run
it (``-Xms256M -Xmx2G`` and ``kafka-run-class.sh``'s G1 options, INFO logging to a file), with
StringConverter (a line's bytes pass through untouched), the worker configs of a Kafka distribution
(``bench/kafka_connect/*.properties``) plus ``plugin.discovery=service_load`` (its own start-up warning advises
it; ``--worker-setting plugin.discovery=hybrid_warn`` restores the default, which scans the classpath for about
6 s more per start) and each connector with ``batch.size`` = ours.

Our side is configured for the same job (``bench/kafka_connect/pyconnect-*.properties``): lines in, the same
bytes out, nothing parsed, which is what StringConverter gives Kafka Connect. So DirectorySource reads with
``format=text`` (each line's text as a str value, as FileStreamSource) and FileSink writes with ``format=text``
(each value's bytes as a line, as FileStreamSink), both with ``key.converter`` / ``value.converter`` =
StringConverter, as Kafka Connect's workers here. (Before, ours parsed every line as JSON and wrote it again
with JsonConverter, and the sink decoded and re-encoded every value: more work than the job asks for, and
not what Kafka Connect was doing. ``format=jsonl`` with JsonConverter still validates every line.)

Cases, each a fresh process (and a fresh topic, connector name, offsets, worker group) per round:

- source, at-least-once: ``connect-standalone`` + FileStreamSourceConnector vs ``pyconnect run
  --at-least-once`` + DirectorySource;
- source, exactly-once: ``connect-distributed`` (one worker, ``exactly.once.source.support=enabled``, the
  connector created over REST as soon as the worker answers, ``exactly.once.support=required``,
  ``transaction.boundary=poll``) vs ``pyconnect run`` + DirectorySource (exactly-once, one transaction per
  poll);
- sink: ``connect-standalone`` + FileStreamSinkConnector vs ``pyconnect run`` + FileSink (exactly-once, files
  published at its commit point, fsync on, ``consumer.max.poll.records`` at its default of 500, Kafka's),
  both reading a topic that holds the same lines.

Measured from outside each process, the same way for both sides:

- **from launch**: records / (last record committed - process start). A source's records are counted by a
  ``read_committed`` consumer of the topic (completion: all N seen); a sink's by the lines in its output
  (Kafka Connect: newlines in its file; ours: the offsets in the names of the ``*.txt`` files it published).
- **after the first record**: the records after the first ones seen / (last - first seen): a source's first
  committed record; a sink's first byte written (ours: its in-flight file).
- **CPU seconds** (user + system, every thread) and **peak RSS** (``VmHWM``) of the process from
  ``/proc/<pid>`` when the last record is seen (or ``wait4``'s rusage if it has exited by then). The
  broker's own CPU is not counted on either side.

Each wait is bounded (``--timeout``). Rounds rotate the order of the cases. Prints each run, then a table:
records/s of both (best / median), the ratios ours/theirs against the targets (from launch >= 2x, after the
first record >= 1.2x) of the best runs, of the medians, and the median of each round's own ratios (both sides of a
case run one after the other), CPU and peak RSS; and whether every output held the input's bytes (the topics:
checked once, in the first round; the sink files: every run).

    .venv/bin/python bench/bench_vs_kafka_connect.py [--records 1000000] [--repeat 3] [--bootstrap H:P]
        [--cases src-alos,src-eos,sink] [--keep DIR] [--worker-setting KEY=VALUE ...]
"""

from __future__ import annotations

import abc
import argparse
import contextlib
import hashlib
import json
import os
import shutil
import statistics
import string
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))

from _kafka import CommittedCounter, ProcessWatch, apache_kafka, create_topic  # noqa: E402

from tests.support.kafka_broker import _die_with_parent  # noqa: E402
from tests.support.ports import free_port  # noqa: E402

CONNECT_VERSION = "4.3.1"
CONNECT_DIR = HERE / "kafka_connect"
POM = CONNECT_DIR / "pom.xml"
# connect-standalone.sh / connect-distributed.sh: KAFKA_HEAP_OPTS; kafka-run-class.sh: KAFKA_JVM_PERFORMANCE_OPTS
CONNECT_JVM = ("-Xms256M -Xmx2G -server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 "
               "-XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 -Djava.awt.headless=true")
PYCONNECT = REPO / ".venv" / "bin" / "pyconnect"
TARGET_LAUNCH = 2.0
TARGET_AFTER_FIRST = 1.2
POLL_S = 0.01
SINK_SUFFIX = ".txt"
"""The published files of ours (``format=text`` in ``pyconnect-sink.properties``)."""


# -- Kafka Connect's jars ---------------------------------------------------------------------------------

def connect_home() -> Path:
    configured = os.environ.get("PYCONNECT_KAFKA_CONNECT_HOME", "").strip()
    return Path(configured).expanduser() if configured else (
        Path.home() / ".cache" / "airflow-pyconnect" / f"kafka-connect-{CONNECT_VERSION}")


def fetch_connect() -> Path:
    """Kafka Connect's jars (the pom's artifacts and what they pull), fetched with Maven when missing, by
    ``scripts/fetch_connect_worker.sh`` (the same cache as the tests' Kafka Connect worker)."""
    done = subprocess.run(["bash", str(REPO / "scripts" / "fetch_connect_worker.sh")], capture_output=True, text=True,
                          timeout=900, check=False)
    if done.returncode != 0:
        raise SystemExit(f"scripts/fetch_connect_worker.sh failed:\n{(done.stdout + done.stderr)[-3000:]}")
    print(done.stdout.strip(), flush=True)
    return connect_home() / "libs"


# -- input ------------------------------------------------------------------------------------------------

def write_input(path: Path, n: int) -> str:
    """``n`` compact JSON lines; returns the sha256 of the file."""
    dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
    digest = hashlib.sha256()
    with open(path, "wb") as f:
        for start in range(0, n, 50_000):
            chunk = "".join(dumps({"id": i, "customer": f"c-{i * 7919 % 100}", "amount": (i * 104_729 % 100_000) / 100,
                                   "ts": 1_700_000_000_000 + i * 1000}) + "\n"
                            for i in range(start, min(n, start + 50_000))).encode()
            f.write(chunk)
            digest.update(chunk)
    return digest.hexdigest()


def fill_topic(bootstrap: str, topic: str, path: Path) -> float:
    import confluent_kafka as ck

    create_topic(bootstrap, topic)
    t0 = time.perf_counter()
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000, "acks": "all"})
    with open(path, "rb") as f:
        for line in f:
            while True:
                try:
                    p.produce(topic, line.rstrip(b"\n"))
                    break
                except BufferError:
                    p.poll(0.05)
    if p.flush(120) != 0:
        raise SystemExit(f"filling {topic}: records still unsent after 120 s")
    return time.perf_counter() - t0


def topic_digest(bootstrap: str, topic: str, n: int, timeout: float) -> str:
    """sha256 of the committed values of the topic's partition 0, each followed by a newline."""
    import confluent_kafka as ck

    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-verify-{uuid.uuid4().hex[:6]}",
                     "enable.auto.commit": False, "isolation.level": "read_committed", "log_level": 0})
    c.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
    digest, seen, deadline = hashlib.sha256(), 0, time.monotonic() + timeout
    try:
        while seen < n and time.monotonic() < deadline:
            for m in c.consume(100_000, 0.5):
                if m.error() is None:
                    digest.update(m.value() + b"\n")
                    seen += 1
    finally:
        c.close()
    return digest.hexdigest() if seen == n else f"only {seen} of {n} records read back"


# -- one run ------------------------------------------------------------------------------------------------

@dataclass
class Run:
    case: str
    side: str  # "ours" | "theirs"
    label: str
    records: int
    launch_s: float = 0.0  # process start -> last record
    after_first_s: float = 0.0
    after_first_records: int = 0
    cpu_s: float = 0.0
    rss_mb: float = 0.0
    same_bytes: bool | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def from_launch(self) -> float:
        return self.records / self.launch_s

    @property
    def after_first(self) -> float:
        return self.after_first_records / self.after_first_s if self.after_first_s > 0 else float("inf")


def _render(template: str, path: Path, **values: object) -> Path:
    values.setdefault("extra", "")
    path.write_text(string.Template((CONNECT_DIR / template).read_text()).substitute(
        {k: str(v) for k, v in values.items()}))
    return path


class Bench:
    def __init__(self, args: argparse.Namespace, bootstrap: str, work: Path, libs: Path, input_file: Path,
                 input_sha: str, sink_topic: str) -> None:
        self.args = args
        self.bootstrap = bootstrap
        self.work = work
        self.libs = libs
        self.input_file = input_file
        self.input_sha = input_sha
        self.sink_topic = sink_topic
        self.n = args.records
        self.java = shutil.which("java") or "java"
        self.worker_extra = "\n".join(args.worker_setting)

    # -- launching ----------------------------------------------------------------------------------------
    def _popen(self, cmd: list[str], log: Path) -> tuple[ProcessWatch, float]:
        with open(log, "wb") as out:
            launched = time.perf_counter()
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    cwd=log.parent, preexec_fn=_die_with_parent)
        return ProcessWatch(proc), launched

    def _connect_cmd(self, main: str, *configs: Path, log_dir: Path) -> list[str]:
        return [self.java, *CONNECT_JVM.split(), f"-Dlog4j2.configurationFile={CONNECT_DIR / 'log4j2.properties'}",
                "-cp", f"{self.libs}/*", main, *map(str, configs)]

    def _pyconnect_cmd(self, config: Path, *extra: str) -> list[str]:
        return [str(PYCONNECT), "--backend", f"kafka://{self.bootstrap}", "run", *extra, str(config)]

    # -- watching -----------------------------------------------------------------------------------------
    def _watch(self, run: Run, watch: ProcessWatch, launched: float, first_seen: Callable[[], tuple[float, int] | None],
               done_at: Callable[[], float | None], log: Path) -> None:
        """Wait (bounded) until ``done_at()`` gives a stamp; sample the process meanwhile and at that moment."""
        deadline = time.monotonic() + self.args.timeout
        last_sample = 0.0
        while True:
            done = done_at()
            if done is not None:
                break
            if time.monotonic() > deadline:
                watch.stop()
                raise SystemExit(f"{run.label}: not every record seen within {self.args.timeout:g} s; its log "
                                 f"{log}:\n{_tail(log)}")
            if not watch.alive():  # exited: the counter may still be reading what it committed last
                grace = time.monotonic() + 5
                while done_at() is None and time.monotonic() < grace:
                    time.sleep(POLL_S)
                if done_at() is None:
                    raise SystemExit(f"{run.label}: the process exited ({watch.returncode}) before every record was "
                                     f"seen; its log {log}:\n{_tail(log)}")
                continue
            now = time.monotonic()
            if now - last_sample > 0.2:
                watch.sample()
                last_sample = now
            time.sleep(POLL_S)
        cpu, rss_kb = watch.sample()
        first = first_seen()
        assert first is not None
        first_at, first_count = first
        run.launch_s = done - launched
        run.after_first_s = done - first_at
        run.after_first_records = self.n - first_count
        run.cpu_s, run.rss_mb = cpu, rss_kb / 1024

    # -- sources ------------------------------------------------------------------------------------------
    def source(self, case: str, side: str, tag: str, verify: bool) -> Run:
        eos = case == "src-eos"
        label = {("src-alos", "theirs"): "Kafka Connect standalone, FileStreamSource (at-least-once)",
                 ("src-alos", "ours"): "pyconnect DirectorySource (at-least-once)",
                 ("src-eos", "theirs"): "Kafka Connect distributed, FileStreamSource (exactly-once)",
                 ("src-eos", "ours"): "pyconnect DirectorySource (exactly-once)"}[(case, side)]
        run = Run(case, side, label, self.n)
        d = self.work / f"{case}-{side}-{tag}"
        d.mkdir()
        topic = f"bench-{case}-{side}-{tag}"
        name = f"bench-{case}-{side}-{tag}"
        create_topic(self.bootstrap, topic)
        counter = CommittedCounter(self.bootstrap, topic, self.n)
        log = d / "process.log"
        watch: ProcessWatch | None = None
        try:
            if side == "ours":
                cfg = _render("pyconnect-source.properties", d / "source.properties", name=name,
                              directory=self.input_file.parent, topic=topic, batch=self.args.batch)
                watch, launched = self._popen(self._pyconnect_cmd(cfg, *([] if eos else ["--at-least-once"])), log)
            elif not eos:
                worker = _render("standalone.properties", d / "worker.properties", bootstrap=self.bootstrap, work=d,
                                 rest_port=free_port(), extra=self.worker_extra)
                conn = _render("file-source.properties", d / "connector.properties", name=name, file=self.input_file,
                               topic=topic, batch=self.args.batch)
                watch, launched = self._popen(
                    self._connect_cmd("org.apache.kafka.connect.cli.ConnectStandalone", worker, conn, log_dir=d), log)
            else:
                port = free_port()
                worker = _render("distributed.properties", d / "worker.properties", bootstrap=self.bootstrap,
                                 group=f"bench-connect-{tag}", rest_port=port, extra=self.worker_extra)
                watch, launched = self._popen(
                    self._connect_cmd("org.apache.kafka.connect.cli.ConnectDistributed", worker, log_dir=d), log)
                self._create_over_rest(port, name, {
                    "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector", "tasks.max": "1",
                    "file": str(self.input_file), "topic": topic, "batch.size": str(self.args.batch),
                    "exactly.once.support": "required", "transaction.boundary": "poll"}, watch, log)

            def first() -> tuple[float, int] | None:
                return None if counter.first_at is None else (counter.first_at, counter.first_count)

            self._watch(run, watch, launched, first, lambda: counter.done_at, log)
            if counter.count != self.n:
                run.notes.append(f"{counter.count} records on the topic, expected {self.n}")
        finally:
            if watch is not None:
                watch.stop()
            counter.close()
        if verify:
            run.same_bytes = topic_digest(self.bootstrap, topic, self.n, self.args.timeout) == self.input_sha
        return run

    def _create_over_rest(self, port: int, name: str, config: dict[str, str], watch: ProcessWatch, log: Path) -> None:
        """PUT the connector's config once the worker answers (bounded; retried while it joins its group)."""
        url = f"http://127.0.0.1:{port}/connectors/{name}/config"
        deadline = time.monotonic() + self.args.timeout
        last = ""
        while time.monotonic() < deadline:
            if not watch.alive():
                raise SystemExit(f"the Kafka Connect worker exited ({watch.returncode}); its log {log}:\n{_tail(log)}")
            req = urllib.request.Request(url, data=json.dumps(config).encode(), method="PUT",
                                         headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=5) as resp:
                    if resp.status in (200, 201):
                        return
                    last = f"HTTP {resp.status}"
            except urllib.error.HTTPError as exc:  # 409 while the worker rebalances, 500 while it starts
                last = f"HTTP {exc.code}: {exc.read()[:300]!r}"
            except OSError as exc:
                last = repr(exc)
            time.sleep(0.1)
        raise SystemExit(f"could not create connector {name} over REST within {self.args.timeout:g} s ({last}); "
                         f"its log {log}:\n{_tail(log)}")

    # -- sinks --------------------------------------------------------------------------------------------
    def sink(self, side: str, tag: str) -> Run:
        label = ("Kafka Connect standalone, FileStreamSink" if side == "theirs"
                 else "pyconnect FileSink (exactly-once, fsync)")
        run = Run("sink", side, label, self.n)
        d = self.work / f"sink-{side}-{tag}"
        d.mkdir()
        name = f"bench-sink-{side}-{tag}"
        log = d / "process.log"
        out_dir = d / "out"
        out_dir.mkdir()
        if side == "theirs":
            out_file = out_dir / "sink.txt"
            worker = _render("standalone.properties", d / "worker.properties", bootstrap=self.bootstrap, work=d,
                             rest_port=free_port(), extra=self.worker_extra)
            conn = _render("file-sink.properties", d / "connector.properties", name=name, file=out_file,
                           topic=self.sink_topic)
            cmd = self._connect_cmd("org.apache.kafka.connect.cli.ConnectStandalone", worker, conn, log_dir=d)
            observer: _SinkObserver = _AppendedFile(out_file, self.n)
        else:
            cfg = _render("pyconnect-sink.properties", d / "sink.properties", name=name, topic=self.sink_topic,
                          directory=out_dir)
            cmd = self._pyconnect_cmd(cfg)
            observer = _PublishedFiles(out_dir / self.sink_topic / "partition=0", self.n)
        stop = threading.Event()
        thread = threading.Thread(target=observer.follow, args=(stop,), daemon=True, name=f"observe-{side}")
        thread.start()
        watch: ProcessWatch | None = None
        try:
            watch, launched = self._popen(cmd, log)
            self._watch(run, watch, launched, lambda: observer.first, lambda: observer.done_at, log)
        finally:
            stop.set()
            thread.join(10)
            if watch is not None:
                watch.stop()
        run.same_bytes = observer.digest() == self.input_sha
        return run


class _SinkObserver(abc.ABC):
    """Watches a sink's output from outside: when its first record and its last one appeared."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.first: tuple[float, int] | None = None
        self.done_at: float | None = None

    def follow(self, stop: threading.Event) -> None:
        while not stop.is_set() and self.done_at is None:
            self.look()
            time.sleep(POLL_S)

    @abc.abstractmethod
    def look(self) -> None:
        """Read what the sink wrote since the last look; set ``first`` and ``done_at`` when seen."""

    @abc.abstractmethod
    def digest(self) -> str:
        """A digest of the sink's whole output (compared with the input's)."""


class _AppendedFile(_SinkObserver):
    """Kafka Connect's FileStreamSink: one file, a line per record, written as it goes."""

    def __init__(self, path: Path, n: int) -> None:
        super().__init__(n)
        self.path = path
        self.pos = 0
        self.lines = 0

    def look(self) -> None:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.pos)
                data = f.read()
        except FileNotFoundError:
            return
        now = time.perf_counter()
        if not data:
            return
        if self.first is None:
            self.first = (now, data.count(b"\n"))
        self.pos += len(data)
        self.lines += data.count(b"\n")
        if self.lines >= self.n:
            self.done_at = now

    def digest(self) -> str:
        return hashlib.sha256(self.path.read_bytes()).hexdigest() if self.path.exists() else ""


class _PublishedFiles(_SinkObserver):
    """Ours: records are written to a hidden in-flight file (the first byte there is the first record written)
    and published by a rename at each commit point as ``<topic>+<p>+<first>+<last>.txt``."""

    def __init__(self, directory: Path, n: int) -> None:
        super().__init__(n)
        self.dir = directory

    def look(self) -> None:
        try:
            entries = list(os.scandir(self.dir))
        except FileNotFoundError:
            return
        now = time.perf_counter()
        published = 0
        for e in entries:
            if e.name.endswith(SINK_SUFFIX) and not e.name.startswith("."):
                first, last = e.name[: -len(SINK_SUFFIX)].rsplit("+", 2)[1:]
                published += int(last) - int(first) + 1
            elif self.first is None and e.name.startswith(".inflight-"):
                with contextlib.suppress(FileNotFoundError):
                    if e.stat().st_size > 0:
                        self.first = (now, 0)
        if published and self.first is None:
            self.first = (now, published)
        if published >= self.n:
            self.done_at = now

    def digest(self) -> str:
        files = sorted((p for p in self.dir.glob(f"*{SINK_SUFFIX}")), key=lambda p: int(p.name.rsplit("+", 2)[1]))
        h = hashlib.sha256()
        for p in files:
            h.update(p.read_bytes())
        return h.hexdigest()


def _tail(path: Path, chars: int = 2500) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return "(no log)"


# -- report ---------------------------------------------------------------------------------------------------

CASES = {
    "src-alos": "source, at-least-once (standalone)",
    "src-eos": "source, exactly-once (distributed, 1 worker)",
    "sink": "sink (standalone)",
}


def report(runs: list[Run], n: int) -> None:
    def med(xs: list[float]) -> float:
        return statistics.median(xs)

    def verdict(ratio: float, target: float) -> str:
        return "OK" if ratio >= target else "BELOW"

    print()
    print(f"{n:,} JSON lines; records/s best / median; ratios ours/theirs of the best and of the medians; seconds "
          f"from launch to the first record, CPU s and peak RSS MB: medians")
    print("| case | side | from launch rec/s | after first rec/s | first record s | CPU s | peak RSS MB | bytes |")
    print("|---|---|---|---|---|---|---|---|")
    summary = []
    for case, title in CASES.items():
        sides = {}
        for side in ("theirs", "ours"):
            rs = [r for r in runs if r.case == case and r.side == side]
            if not rs:
                continue
            sides[side] = rs
            same = {r.same_bytes for r in rs if r.same_bytes is not None}
            print(f"| {title} | {rs[0].label} | {max(r.from_launch for r in rs):,.0f} / {med([r.from_launch for r in rs]):,.0f} "
                  f"| {max(r.after_first for r in rs):,.0f} / {med([r.after_first for r in rs]):,.0f} "
                  f"| {med([r.launch_s - r.after_first_s for r in rs]):.1f} "
                  f"| {med([r.cpu_s for r in rs]):.1f} | {med([r.rss_mb for r in rs]):.0f} "
                  f"| {'same' if same == {True} else 'DIFFERENT' if False in same else 'unchecked'} |")
        if len(sides) == 2:
            o, t = sides["ours"], sides["theirs"]
            launch_best = max(r.from_launch for r in o) / max(r.from_launch for r in t)
            launch_med = med([r.from_launch for r in o]) / med([r.from_launch for r in t])
            after_best = max(r.after_first for r in o) / max(r.after_first for r in t)
            after_med = med([r.after_first for r in o]) / med([r.after_first for r in t])
            # each round ran both sides one after the other: their own ratios are the steadiest on a shared machine
            pairs = list(zip(o, t, strict=False))
            launch_paired = med([a.from_launch / b.from_launch for a, b in pairs])
            after_paired = med([a.after_first / b.after_first for a, b in pairs])
            cpu = med([r.cpu_s for r in o]) / med([r.cpu_s for r in t])
            rss = med([r.rss_mb for r in o]) / med([r.rss_mb for r in t])
            summary.append(
                f"{title}: from launch {launch_best:.2f}x / {launch_med:.2f}x (target >= {TARGET_LAUNCH}x: "
                f"{verdict(launch_best, TARGET_LAUNCH)} / {verdict(launch_med, TARGET_LAUNCH)}); after the first "
                f"record {after_best:.2f}x / {after_med:.2f}x (target >= {TARGET_AFTER_FIRST}x: "
                f"{verdict(after_best, TARGET_AFTER_FIRST)} / {verdict(after_med, TARGET_AFTER_FIRST)}); the rounds' own "
                f"ratios, median: {launch_paired:.2f}x from launch, {after_paired:.2f}x after the first record; CPU ours/theirs "
                f"{cpu:.2f}x, peak RSS ours/theirs {rss:.2f}x")
    print()
    print("ratios ours/theirs, best / median:")
    for line in summary:
        print(f"- {line}")


# -- main -----------------------------------------------------------------------------------------------------

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=1000, help="records per poll of both sources (their transactions)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds; each runs every case once, the order rotating")
    ap.add_argument("--cases", default=",".join(CASES), help=f"comma list among {', '.join(CASES)}")
    ap.add_argument("--bootstrap", help="use this running broker (HOST:PORT) instead of starting Apache Kafka 4.4.0")
    ap.add_argument("--worker-setting", action="append", default=[], metavar="KEY=VALUE",
                    help="a Kafka Connect worker setting (repeatable), after the template's own: e.g. "
                         "plugin.discovery=hybrid_warn (Kafka Connect's default) to time its classpath scan too")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds any one wait may take")
    ap.add_argument("--keep", help="work directory to keep (input, configs, logs, outputs); default: a temp dir")
    args = ap.parse_args()
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        ap.error(f"unknown cases {unknown}")
    if not PYCONNECT.exists():
        raise SystemExit(f"{PYCONNECT} is missing: install the project into .venv (scripts/bootstrap.sh)")
    libs = fetch_connect()
    with contextlib.ExitStack() as stack:
        if args.keep:
            work = Path(args.keep).resolve()
            work.mkdir(parents=True, exist_ok=True)
        else:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-vs-connect-")))
        data = work / "data"
        data.mkdir(exist_ok=True)
        input_file = data / "orders.jsonl"
        t0 = time.perf_counter()
        input_sha = write_input(input_file, args.records)
        print(f"input: {args.records:,} lines, {input_file.stat().st_size / 1e6:.1f} MB in {input_file} "
              f"({time.perf_counter() - t0:.1f} s)", flush=True)
        bootstrap = args.bootstrap or stack.enter_context(apache_kafka(work / "broker"))
        run_id = uuid.uuid4().hex[:6]
        sink_topic = f"bench-sink-input-{run_id}"
        if "sink" in cases:
            seconds = fill_topic(bootstrap, sink_topic, input_file)
            print(f"sink input topic {sink_topic}: {args.records:,} records in {seconds:.1f} s", flush=True)
        bench = Bench(args, bootstrap, work, libs, input_file, input_sha, sink_topic)
        jobs = [(case, side) for case in cases for side in ("theirs", "ours")]
        runs: list[Run] = []
        for round_ in range(args.repeat):
            shift = (2 * round_ + round_ % 2) % len(jobs)  # rotate the cases, and swap the sides every other round
            order = jobs[shift:] + jobs[:shift]
            for case, side in order:
                tag = f"{run_id}-{round_}"
                if case == "sink":
                    run = bench.sink(side, tag)
                else:
                    run = bench.source(case, side, tag, verify=round_ == 0)
                runs.append(run)
                print(f"round {round_ + 1} {case:8} {side:6}: {run.from_launch:>9,.0f} rec/s from launch "
                      f"({run.launch_s:5.1f} s), {run.after_first:>9,.0f} after the first record "
                      f"({run.after_first_s:5.1f} s); CPU {run.cpu_s:5.1f} s, peak RSS {run.rss_mb:4.0f} MB"
                      f"{'' if run.same_bytes is None else ', same bytes' if run.same_bytes else ', BYTES DIFFER'}"
                      f"{'; ' + '; '.join(run.notes) if run.notes else ''}  [{run.label}]", flush=True)
        report(runs, args.records)
        return 0 if all(r.same_bytes is not False for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
