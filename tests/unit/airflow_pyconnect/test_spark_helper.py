"""airflow_pyconnect.spark: the SparkSubmitOperator arguments, conf and environment it renders.
(What a real spark-submit receives, and the import cost: tests/integration/airflow_pyconnect/test_spark_submit.py.)
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from airflow_pyconnect.spark import (
    backend_arg,
    committed_ranges_arg,
    ranges_span,
    spark_conf,
    spark_env,
    spark_kafka_jars,
    spark_submit_kwargs,
)


def test_spark_env_puts_this_virtualenv_first_and_names_its_python(monkeypatch: pytest.MonkeyPatch) -> None:
    venv_bin = str(Path(sys.executable).parent)
    monkeypatch.setenv("PATH", os.pathsep.join(["/usr/local/bin", venv_bin, "/usr/bin"]))
    env = spark_env({"EXTRA": "1"})
    assert env["PATH"].split(os.pathsep) == [venv_bin, "/usr/local/bin", "/usr/bin"]
    assert (Path(venv_bin) / "spark-submit").exists()
    # the virtualenv's own interpreter path (a symlink), not the base interpreter it points to
    assert env["PYSPARK_PYTHON"] == env["PYSPARK_DRIVER_PYTHON"] == sys.executable
    assert env["EXTRA"] == "1"


def test_spark_submit_kwargs_layout() -> None:
    kwargs = spark_submit_kwargs("handoff", args=["--date", "{{ ds }}"], conf={"spark.ui.enabled": "false"},
                                 env={"TZ": "UTC"})
    # OpenLineage's parent job information is passed when its provider is installed (the shared venv has it)
    assert set(kwargs) == {"application_args", "conf", "env_vars", "openlineage_inject_parent_job_info"}
    assert kwargs["openlineage_inject_parent_job_info"] is True
    assert "openlineage_inject_parent_job_info" not in spark_submit_kwargs("handoff", openlineage=False)
    assert kwargs["application_args"] == [
        "--backend", "{{ (ti.xcom_pull(task_ids='handoff', key='return_value') or {}).get('backend', '') }}",
        "--ranges", committed_ranges_arg("handoff"),
        "--date", "{{ ds }}",
    ]
    assert kwargs["conf"] == {"spark.pyspark.python": sys.executable, "spark.pyspark.driver.python": sys.executable,
                              "spark.ui.enabled": "false"}
    assert kwargs["env_vars"]["TZ"] == "UTC" and kwargs["env_vars"]["PYSPARK_PYTHON"] == sys.executable
    explicit = spark_submit_kwargs("ingest", backend="sqlite:////data/p.db", key="k")
    assert explicit["application_args"][:2] == ["--backend", "sqlite:////data/p.db"]
    assert explicit["application_args"][3] == committed_ranges_arg("ingest", "k")
    assert backend_arg("x") == "{{ (ti.xcom_pull(task_ids='x', key='return_value') or {}).get('backend', '') }}"
    assert spark_conf({"a": 1})["a"] == 1


class _Pulls:
    """Stands in for the task instance in a plain Jinja render: returns XComs from a dict."""

    def __init__(self, xcoms: dict) -> None:
        self.xcoms = xcoms

    def xcom_pull(self, task_ids: str, key: str) -> object:
        return self.xcoms.get((task_ids, key))


@pytest.mark.parametrize(("value", "rendered"), [
    ({"backend": "sqlite:///x", "ranges": {"o": {"0": [1, 2]}}}, {"o": {"0": [1, 2]}}),  # a handoff
    ({"connector": "c", "ranges": {}, "interval_ranges": {"o": {"0": [[0, 3], [5, 6]]}}},
     {"o": {"0": [[0, 3], [5, 6]]}}),  # a source run result: its interval's ranges, also on a rerun
    ({"o": {"1": [4, 9]}}, {"o": {"1": [4, 9]}}),  # a bare ranges mapping (ingest.output["ranges"])
    (None, {}),
])
def test_committed_ranges_arg_renders_every_accepted_xcom_shape(value: object, rendered: object) -> None:
    import jinja2
    from airflow.sdk import DAG
    from airflow.sdk.bases.operator import BaseOperator

    env = jinja2.Environment()
    env.filters["tojson"] = lambda v: json.dumps(v)
    with DAG(dag_id="arg", schedule=None):
        op = BaseOperator(task_id="ingest")
    for ref, key in (("ingest", "return_value"), (op.output, "return_value"), (op.output["ranges"], "ranges")):
        text = env.from_string(committed_ranges_arg(ref)).render(ti=_Pulls({("ingest", key): value}))
        assert json.loads(text) == rendered, (ref, text)


def test_ranges_span_counts_offsets_of_single_and_multiple_spans() -> None:
    assert ranges_span({"a": {"0": [0, 10], "1": [[5, 7], [9, 9], [20, 21]]}, "b": {}}) == 13
    assert ranges_span({}) == 0




def test_kafka_jobs_get_the_jars_of_sparks_kafka_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYCONNECT_SPARK_KAFKA_HOME", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"fetch_spark_kafka\.sh"):
        spark_submit_kwargs("handoff", kafka=True)
    (tmp_path / "jars").mkdir()
    for name in ("spark-sql-kafka-0-10_2.13-4.2.0.jar", "commons-pool2-2.13.1.jar"):
        (tmp_path / "jars" / name).write_bytes(b"")
    want = ",".join(str(tmp_path / "jars" / n) for n in ("commons-pool2-2.13.1.jar", "spark-sql-kafka-0-10_2.13-4.2.0.jar"))
    assert spark_kafka_jars() == want
    assert spark_submit_kwargs("handoff", kafka=True)["jars"] == want
    assert "jars" not in spark_submit_kwargs("handoff")
    with pytest.raises(FileNotFoundError, match=r"spark-avro.*fetch_spark_kafka\.sh"):
        spark_submit_kwargs("handoff", avro=True)  # a job reading Avro values needs from_avro too
    (tmp_path / "jars" / "spark-avro_2.13-4.2.0.jar").write_bytes(b"")
    assert spark_submit_kwargs("handoff", avro=True)["jars"] == spark_kafka_jars(avro=True) == ",".join(
        str(tmp_path / "jars" / n) for n in ("commons-pool2-2.13.1.jar", "spark-avro_2.13-4.2.0.jar",
                                             "spark-sql-kafka-0-10_2.13-4.2.0.jar"))
