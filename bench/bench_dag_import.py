"""DAG-file parse cost of the provider: a DAG using the pyconnect operators against the same DAG
built from the standard provider's ``EmptyOperator``.

    .venv/bin/python bench/bench_dag_import.py [--repeat 15]

Both DAG files have the same shape (three tasks: source → sensor → sink, templated fields, the same
DAG arguments). Each measurement is one fresh interpreter that imports the DAG file the way the DAG
processor does (``importlib`` from a path) and reports the wall time of that import, Airflow's own
imports included, so the figure is what a DAG processor pays for a cold parse. The two files are
measured alternately, ``--repeat`` times each, cold (a fresh interpreter: Airflow's imports
included) and warm (``airflow.sdk`` imported before the clock starts, as in a DAG processor, so the
figure is the DAG file's own cost); the medians and the ratios ours/baseline are printed,
as well as the modules the pyconnect DAG loaded that the baseline did not (none of confluent_kafka,
pyspark, a backend or a connector may be among them). ``--example`` also times
``dags/example_pyconnect_backfill.py``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

BASELINE = textwrap.dedent('''
    from datetime import datetime

    from airflow.providers.standard.operators.empty import EmptyOperator
    from airflow.sdk import DAG

    with DAG(dag_id="bench_baseline", schedule="@daily", start_date=datetime(2026, 1, 1), catchup=False) as dag:
        src = EmptyOperator(task_id="src")
        wait = EmptyOperator(task_id="wait")
        sink = EmptyOperator(task_id="sink")
        src >> wait >> sink
''')

PYCONNECT = textwrap.dedent('''
    from datetime import datetime

    from airflow.sdk import DAG

    from airflow_pyconnect.operators.sink import PyConnectSinkOperator
    from airflow_pyconnect.operators.source import PyConnectSourceOperator
    from airflow_pyconnect.sensors.offsets import PyConnectCommittedOffsetsSensor

    with DAG(dag_id="bench_pyconnect", schedule="@daily", start_date=datetime(2026, 1, 1), catchup=False) as dag:
        src = PyConnectSourceOperator(
            task_id="src",
            connector_config={"name": "gen", "connector.class": "connect_runtime.connectors.datagen.DataGenSource",
                              "topic": "events", "seed": "{{ ds_nodash }}"},
        )
        wait = PyConnectCommittedOffsetsSensor(task_id="wait", connector_name="gen", connector_kind="source",
                                               target_offsets="{{ ti.xcom_pull(task_ids='src') }}")
        sink = PyConnectSinkOperator(
            task_id="sink",
            connector_config={"name": "archive", "connector.class": "connect_runtime.connectors.files.FileSink",
                              "topics": "events", "directory": "/tmp/archive"},
            until_offsets="{{ ti.xcom_pull(task_ids='src') }}",
        )
        src >> wait >> sink
''')

PROBE = textwrap.dedent('''
    import importlib.util, json, sys, time
    path, mode = sys.argv[1], sys.argv[2]
    if mode == "warm":  # what a DAG processor already has loaded before it parses a file
        import airflow.sdk, airflow.providers.standard.operators.empty  # noqa: F401,E401
        from airflow.sdk import DAG, BaseOperator, BaseSensorOperator  # noqa: F401
    t0 = time.perf_counter()
    spec = importlib.util.spec_from_file_location("bench_dag_file", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    seconds = time.perf_counter() - t0
    assert module.dag.task_ids
    print(json.dumps({"seconds": seconds, "modules": sorted(sys.modules)}))
''')

HEAVY = ("confluent_kafka", "pyspark", "connect_runtime.backends.sqlite", "connect_runtime.backends.kafka",
         "connect_runtime.connectors", "connect_runtime.runtime", "connect_runtime.spark")


def measure(path: Path, mode: str) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE, str(path), mode], capture_output=True, text=True, timeout=120,
                         cwd=REPO)
    if out.returncode != 0:
        raise SystemExit(f"importing {path} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=15, help="fresh interpreters per DAG file (default 15)")
    parser.add_argument("--example", action="store_true", help="also time dags/example_pyconnect_backfill.py")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        files = {"baseline (EmptyOperator)": Path(tmp) / "bench_baseline.py",
                 "pyconnect operators": Path(tmp) / "bench_pyconnect.py"}
        files["baseline (EmptyOperator)"].write_text(BASELINE)
        files["pyconnect operators"].write_text(PYCONNECT)
        if args.example:
            files["example_pyconnect_backfill.py"] = REPO / "dags" / "example_pyconnect_backfill.py"
        for path in files.values():  # warm the OS page cache and __pycache__ once
            measure(path, "cold")
        times: dict[tuple[str, str], list[float]] = {}
        modules: dict[str, set[str]] = {}
        for _ in range(args.repeat):
            for mode in ("cold", "warm"):
                for name, path in files.items():
                    result = measure(path, mode)
                    times.setdefault((mode, name), []).append(result["seconds"])
                    if mode == "cold":
                        modules[name] = set(result["modules"])

    base_name, ours_name = "baseline (EmptyOperator)", "pyconnect operators"
    for mode, what in (("cold", "fresh interpreter, Airflow imports included"),
                       ("warm", "airflow.sdk already imported, as in a DAG processor")):
        print(f"DAG file import time, {what}; median of {args.repeat} (min .. max):")
        for name in files:
            values = times[(mode, name)]
            print(f"  {name:32s} {statistics.median(values) * 1000:8.1f} ms "
                  f"({min(values) * 1000:.1f} .. {max(values) * 1000:.1f})")
        ratio = statistics.median(times[(mode, ours_name)]) / statistics.median(times[(mode, base_name)])
        print(f"  ratio pyconnect / baseline ({mode}): {ratio:.3f}")
    extra = sorted(modules[ours_name] - modules[base_name])
    print(f"modules loaded only by the pyconnect DAG: {len(extra)}: "
          + ", ".join(m for m in extra if "." not in m or m.startswith(("airflow_pyconnect", "connect_runtime"))))
    heavy = [m for m in extra if any(m == h or m.startswith(h + ".") for h in HEAVY)]
    print(f"heavy modules among them (must be none): {heavy or 'none'}")
    return 1 if heavy else 0


if __name__ == "__main__":
    raise SystemExit(main())
