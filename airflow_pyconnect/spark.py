"""Hand a source run's committed offset ranges to a ``SparkSubmitOperator``, with no Jinja in the DAG.

Four pieces:

- :func:`spark_handoff` (run it in a small ``@task`` after the source operator): the backend URL of
  the source's connection plus the committed ranges of its XCom,
  ``{"backend": url, "ranges": {topic: {"<p>": [from, to]}}, "records": n, ...}``. The ranges are
  the source result's ``interval_ranges``: those of the whole data interval, also on a rerun that
  wrote nothing new, so the Spark job of a rerun reads the same records.
- :func:`spark_submit_kwargs`: ``application_args`` (``--backend <url> --ranges <json>``, rendered
  from that XCom at run time), ``conf`` and ``env_vars`` for ``SparkSubmitOperator``. Pass the
  handoff task's output (an ``XComArg``; a task id string works too)::

      handoff_out = handoff(ingest.output)
      totals = SparkSubmitOperator(task_id="totals", application="jobs/totals.py",
                                   **spark_submit_kwargs(handoff_out, args=["--date", "{{ ds }}"]))
      handoff_out >> totals   # the arguments are rendered Jinja: set the dependency

  With the source operator's output itself (``spark_submit_kwargs(ingest.output, backend=url)``)
  the job reads its ``interval_ranges``.

  :func:`committed_ranges_arg` / :func:`backend_arg` are the two Jinja strings on their own; they
  also take a plain source run result (its ``ranges``).
- :func:`spark_kafka_jars`: on the Kafka backend, the ``--jars`` of Spark's own Kafka source and Avro functions
  (``spark_submit_kwargs(..., kafka=True)`` passes them; ``avro=True`` also requires ``spark-avro``), so the job
  reads its range natively with :func:`connect_runtime.spark.read_kafka_range` instead of the Python data source,
  or an Avro topic as typed columns with :func:`connect_runtime.spark.read_kafka_avro`.
- On a secured Kafka backend, pass these kwargs to
  :class:`~airflow_pyconnect.operators.spark_submit.PyConnectSparkSubmitOperator` (``pyconnect_conn_id``): it
  hands the job the connection's credentials at run time, never through these (templated) arguments.
- :func:`spark_env`: ``PYSPARK_PYTHON`` = this interpreter and ``PATH`` starting with its ``bin``
  directory, so ``spark-submit`` of the virtualenv is found and Spark's Python workers run the
  same Python (with ``connect_runtime`` importable) without the user exporting anything.

Import-cheap: no pyspark, no backend, no Spark provider import at module level.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

# ------------------------------------------------------------------------------------- Jinja args


def _source(task: Any, key: str) -> tuple[str, str]:
    """``(task_id, key)`` of an XCom reference: a task id string or an ``XComArg``
    (``task.output``, ``task.output["key"]``; its own key wins over ``key``)."""
    if isinstance(task, str):
        return task, key
    operator = getattr(task, "operator", None)
    task_id = getattr(operator, "task_id", None)
    if not isinstance(task_id, str):
        raise TypeError(f"expected a task id or an XComArg (task.output), got {type(task).__name__}")
    own = getattr(task, "key", None)
    return task_id, own if isinstance(own, str) and own else key


def _pull(task: Any, key: str) -> str:
    task_id, key = _source(task, key)
    return f"(ti.xcom_pull(task_ids={task_id!r}, key={key!r}) or {{}})"


def committed_ranges_arg(task: Any, key: str = "return_value") -> str:
    """Jinja rendering the ranges of a task's XCom as compact JSON (``{"orders": {"0": [0, 500]}}``,
    ``{}`` when the XCom is missing): a handoff's ``ranges``, a source run result's
    ``interval_ranges`` (what its data interval holds), or a bare ranges mapping
    (``ingest.output["interval_ranges"]``). ``task``: a task id or an ``XComArg``."""
    pulled = _pull(task, key)
    return ("{% set x = " + pulled + " %}{{ (x.get('interval_ranges') or x.get('ranges', {}) "
            "if ('connector' in x or 'backend' in x) else x) | tojson }}")


def backend_arg(task: Any, key: str = "return_value") -> str:
    """Jinja rendering the ``backend`` URL of a handoff XCom (:func:`spark_handoff`)."""
    return "{{ " + _pull(task, key) + ".get('backend', '') }}"


def spark_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for ``spark-submit``: PATH starting with this interpreter's ``bin`` (where a
    virtualenv keeps ``spark-submit``), ``PYSPARK_PYTHON`` / ``PYSPARK_DRIVER_PYTHON`` = this
    interpreter (the symlink of the virtualenv, not the base interpreter it points to)."""
    python = sys.executable
    bin_dir = str(Path(python).parent)
    path = os.environ.get("PATH", "")
    parts = [p for p in path.split(os.pathsep) if p]
    env = {
        "PATH": os.pathsep.join([bin_dir, *(p for p in parts if p != bin_dir)]),
        "PYSPARK_PYTHON": python,
        "PYSPARK_DRIVER_PYTHON": python,
    }
    env.update(extra or {})
    return env


def spark_conf(extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Spark conf that pins the Python of the driver and the workers to this interpreter."""
    conf: dict[str, Any] = {
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
    }
    conf.update(extra or {})
    return conf


def spark_kafka_jars(*, avro: bool = False) -> str:
    """The ``--jars`` value (comma-separated absolute paths; also good as ``spark.jars``) that gives a Spark job
    Spark's own Kafka source and Avro functions (fetched together), matching the installed pyspark, for
    :func:`connect_runtime.spark.read_kafka_range` and :func:`connect_runtime.spark.read_kafka_avro` on the Kafka
    backend. Cheap (lists one directory).

    :param avro: also require Spark's Avro functions (``spark-avro``, for ``read_kafka_avro``).
    :raises FileNotFoundError: naming ``scripts/fetch_spark_kafka.sh``, when the jars were not fetched.
    """
    from connect_runtime.spark_kafka import kafka_jars

    return ",".join(kafka_jars(avro=avro))


def spark_submit_kwargs(
    handoff: Any,
    *,
    key: str = "return_value",
    backend: str | None = None,
    args: Sequence[str] = (),
    conf: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    kafka: bool = False,
    avro: bool = False,
    openlineage: bool | None = None,
) -> dict[str, Any]:
    """Keyword arguments for ``SparkSubmitOperator`` that hand the job its committed ranges.

    :param handoff: the XCom holding the ranges, as an ``XComArg`` (``handoff_task.output``) or a task
        id: an :func:`spark_handoff` task (also carries the backend URL) or the source operator itself
        (then pass ``backend``). The arguments are Jinja rendered when the Spark task runs: set the
        dependency on that task.
    :param key: the XCom key.
    :param backend: the backend URL for the job (default: the ``backend`` of the XCom).
    :param args: more application arguments, after ``--backend <url> --ranges <json>``.
    :param conf: more Spark conf (merged over :func:`spark_conf`).
    :param env: more environment variables (merged over :func:`spark_env`).
    :param kafka: also pass ``jars`` (:func:`spark_kafka_jars`), so a job on the Kafka backend reads its range
        with Spark's own Kafka source (:func:`connect_runtime.spark.read_kafka_range`).
    :param avro: as ``kafka``, and require Spark's Avro functions among the jars, for a job reading Avro values
        as typed columns (:func:`connect_runtime.spark.read_kafka_avro`).
    :param openlineage: pass OpenLineage's parent job information to the job
        (``SparkSubmitOperator(openlineage_inject_parent_job_info=True)``: the Airflow task's job and run ids as
        ``spark.openlineage.parent*`` / ``rootParent*`` conf, so the Spark job's own OpenLineage events hang under
        the task; docs/lineage.md). Default: when ``apache-airflow-providers-openlineage`` is installed. ``False``
        leaves it to the operator's default, ``[openlineage] spark_inject_parent_job_info``. A ``conf`` that
        already names ``spark.openlineage.parent*`` keeps its values (the provider then injects nothing).
    :return: ``{"application_args": [...], "conf": {...}, "env_vars": {...}}`` (and ``"jars"`` with ``kafka``,
        ``"openlineage_inject_parent_job_info"`` with ``openlineage``).
    """
    kwargs: dict[str, Any] = {
        "application_args": [
            "--backend", backend if backend is not None else backend_arg(handoff, key),
            "--ranges", committed_ranges_arg(handoff, key),
            *args,
        ],
        "conf": spark_conf(conf),
        "env_vars": spark_env(env),
    }
    if kafka or avro:
        kwargs["jars"] = spark_kafka_jars(avro=avro)
    if openlineage is None:
        import importlib.util

        openlineage = importlib.util.find_spec("airflow.providers.openlineage") is not None
    if openlineage:
        kwargs["openlineage_inject_parent_job_info"] = True
    return kwargs


# ----------------------------------------------------------------------------------------- handoff


def ranges_span(ranges: Mapping[str, Mapping[str, Sequence[Any]]]) -> int:
    """Offsets the ranges span: records on SQLite, an upper bound on Kafka (markers take offsets).
    A partition's value is ``[from, to]`` or a list of such spans."""
    total = 0
    for parts in ranges.values():
        for spans in parts.values():
            many = spans if spans and isinstance(spans[0], Sequence) else [spans]
            total += sum(max(0, int(s[1]) - int(s[0])) for s in many if len(s) == 2)
    return total


def spark_handoff(source_result: Any, pyconnect_conn_id: str = "pyconnect_default") -> dict[str, Any]:
    """What a Spark job needs from a source run: ``{"backend": url, "ranges": ..., "records": ...,
    "new_records": ...}``. Run it in a ``@task`` after the source operator; its XCom feeds
    :func:`spark_submit_kwargs`.

    ``ranges`` are the source XCom's ``interval_ranges`` (its ``ranges`` for an older result without
    them): the ranges of the whole data interval, also on a rerun that wrote nothing new, so a rerun
    reads the same records. ``backend`` is the URL of the connection the source used (client settings, which may
    hold secrets, are not handed over: on a secured Kafka, submit with
    :class:`~airflow_pyconnect.operators.spark_submit.PyConnectSparkSubmitOperator`, which hands them to the job at
    run time). ``records``: offsets the ranges span;
    ``new_records``: records this source run wrote.

    :param source_result: the source operator's XCom (``SourceRunResult.to_dict()``) or its JSON text.
    :param pyconnect_conn_id: the ``pyconnect`` connection the source operator used.
    """
    from airflow_pyconnect.hooks.pyconnect import PyConnectHook

    data = json.loads(source_result) if isinstance(source_result, str) else source_result
    if not isinstance(data, Mapping) or not isinstance(data.get("ranges"), Mapping):
        raise ValueError(f"expected a source run result with 'ranges', got {source_result!r:.300}")
    url, _settings = PyConnectHook(pyconnect_conn_id=pyconnect_conn_id).backend_config()
    from connect_runtime import ranges as ranges_mod

    chosen = data.get("interval_ranges") or data["ranges"]
    ranges = ranges_mod.dump(ranges_mod.parse(chosen))
    return {
        "backend": url,
        "connector": data.get("connector"),
        "ranges": ranges,
        "records": ranges_span(ranges),
        "new_records": int(data.get("records") or 0),
    }


__all__ = [
    "backend_arg",
    "committed_ranges_arg",
    "ranges_span",
    "spark_conf",
    "spark_env",
    "spark_handoff",
    "spark_kafka_jars",
    "spark_submit_kwargs",
]
