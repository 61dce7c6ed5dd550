"""Shared fixtures (the helpers live in tests/support). Tests use real SQLite files, processes, Airflow and Spark."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest_plugins = [
    "tests.support.kafka_broker", "tests.support.kafka_cluster", "tests.support.kafka_secure", "tests.support.moto_server",
    "tests.support.postgres", "tests.support.schema_registry", "tests.support.spark",
]

# Every Spark JVM the tests start (spark-submit from Airflow tasks, the tests' SparkSession) is short-lived: the client
# compiler only and the serial collector make one of the examples' Spark steps about a third faster on 2 cores
# (measured: 34-48 s -> 24-27 s for orders_daily_totals.py, spark-submit in local mode), as the tests' Kafka broker
# and Kafka Connect worker already run. spark-submit reads SPARK_SUBMIT_OPTS for its own JVM (the driver, in client
# and local mode); a value the caller set wins.
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A fresh embedded backend in a temporary file."""
    return f"sqlite:///{tmp_path / 'pyconnect.db'}"


# -- one command, groups in order ------------------------------------------------------------------------------------
# The README's single test command runs every group, cheapest and most telling first, and the summary says which
# group went red: lint and types (ruff, mypy, import contracts, the repository's own rules), then unit (fast, no
# process or server), then the backend contract suite, then integration (real Airflow, Kafka, PostgreSQL, Spark) and
# the example DAGs as system tests.
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("lint and types", ("tests/integration/test_repo.py",)),
    ("unit", ("tests/unit/",)),
    ("contract", ("tests/contract/",)),
    ("integration", ("tests/integration/", "tests/system/")),
)


def _group_of(nodeid: str) -> int:
    for index, (_, prefixes) in enumerate(GROUPS):
        if nodeid.startswith(prefixes):
            return index
    return len(GROUPS) - 1


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: _group_of(item.nodeid))  # stable: the order inside a group is pytest's


# A process that dies by a signal (a crash in a C extension, where faulthandler may print nothing) leaves no pytest
# report: .ci/run sets PYCONNECT_CURRENT_TEST to a file that holds the test under way, and names it after such a death.
_CURRENT_TEST = os.environ.get("PYCONNECT_CURRENT_TEST")


def pytest_runtest_logstart(nodeid: str) -> None:
    if _CURRENT_TEST:
        Path(_CURRENT_TEST).write_text(nodeid + "\n")


# Seconds spent per test module (setup, call and teardown), so the summary says where the suite's time goes.
_MODULE_SECONDS: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    module = report.nodeid.split("::", 1)[0]
    _MODULE_SECONDS[module] = _MODULE_SECONDS.get(module, 0.0) + report.duration


def _slowest_modules(terminalreporter: pytest.TerminalReporter, count: int = 15) -> None:
    if len(_MODULE_SECONDS) < 2:
        return
    total = sum(_MODULE_SECONDS.values())
    terminalreporter.section(f"slowest {count} modules (setup + call + teardown)")
    for module, seconds in sorted(_MODULE_SECONDS.items(), key=lambda kv: -kv[1])[:count]:
        terminalreporter.write_line(f"{seconds:8.1f}s {100 * seconds / total:5.1f}%  {module}")


@pytest.hookimpl(trylast=True)  # after the slowest durations, so a log's tail shows it
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    _slowest_modules(terminalreporter)
    counts: list[dict[str, int]] = [{} for _ in GROUPS]
    first_failure: list[str | None] = [None for _ in GROUPS]
    for outcome in ("passed", "failed", "error", "skipped", "xfailed", "xpassed"):
        for report in terminalreporter.stats.get(outcome, []):
            nodeid = getattr(report, "nodeid", "")
            if not nodeid or (outcome == "passed" and getattr(report, "when", "call") != "call"):
                continue
            index = _group_of(nodeid)
            counts[index][outcome] = counts[index].get(outcome, 0) + 1
            if outcome in ("failed", "error") and first_failure[index] is None:
                first_failure[index] = nodeid
    if not any(counts):
        return
    terminalreporter.section("groups")
    for (name, _), count, failure in zip(GROUPS, counts, first_failure, strict=True):
        if not count:
            continue
        red = bool(count.get("failed") or count.get("error"))
        text = ", ".join(f"{n} {outcome}" for outcome, n in count.items())
        terminalreporter.write_line(f"{'RED  ' if red else 'green'} {name}: {text}"
                                    + (f" (first: {failure})" if failure else ""))
