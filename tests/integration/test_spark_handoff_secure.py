"""The Spark hand-off on a secured Kafka backend, under a real ``airflow dags test`` (DAG
``pyconnect_test_spark_secure``, tests/support/dag_files): a least-privilege SCRAM-SHA-512 principal (the exactly-once
source's ACLs and the Spark role's Read, docs/kafka.md) writes a range with ``PyConnectSourceOperator``; a
``PyConnectSparkSubmitOperator`` given the same ``pyconnect_conn_id`` runs a real ``spark-submit`` (local master,
Spark's Kafka source from ``spark_kafka_jars()``) whose job reads exactly that range with the settings the operator
resolved in the worker and put in spark-submit's environment. A second one, whose connection holds a wrong password,
fails before ``spark-submit`` with one error naming the broker and the cause; a third, in cluster deploy mode, is
refused, saying why and what to do instead.

The passwords appear nowhere Airflow keeps or shows: not in the output of ``airflow dags test`` (it holds the task
logs), XCom, the rendered template fields in the metadata database, nor on the ``spark-submit``
command line (as the Spark hook logged it and as the job read it from its parent JVM in ``/proc``).
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import pytest

from connect_runtime.backends import open_backend
from connect_runtime.backends.base import RANGES_STORE, REGISTRY_STORE
from connect_runtime.kafka_acls import role_acls
from connect_runtime.spark_kafka import SETTINGS_ENV
from tests.support import REPO
from tests.support.airflow_env import AirflowEnv, shared_airflow_env
from tests.support.kafka_secure import SecuredKafka, committed_ids

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.airflow, pytest.mark.faithful_kafka]

DAG_ID = "pyconnect_test_spark_secure"
RECORDS = 200
JOB = REPO / "tests" / "support" / "spark_jobs" / "read_secure_range.py"


@pytest.fixture(scope="module")
def af(tmp_path_factory: pytest.TempPathFactory) -> AirflowEnv:
    return shared_airflow_env(tmp_path_factory)


def _prepare(kafka: SecuredKafka, topic: str) -> None:
    """As the admin (a platform team does it once): the runtime's stores and the data topic, 2 partitions (the
    role's principal may not Create)."""
    settings = {k: v for k, v in kafka.client_settings().items() if k != "bootstrap.servers"}
    backend = open_backend(kafka.url, settings)
    try:
        for store in (None, REGISTRY_STORE, RANGES_STORE):
            backend.offsets_topic(store)  # type: ignore[attr-defined]
        backend.create_topics({topic: 2})
    finally:
        backend.close()


def _snake(name: str) -> str:
    """``TransactionalId`` -> ``transactional_id``, as :meth:`SecuredKafka.grant` names resource types and operations."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _conn(kafka: SecuredKafka, user: str, password: str) -> str:
    return json.dumps({"conn_type": "pyconnect", "host": f"kafka://{kafka.listener('SASL').bootstrap}",
                       "login": user, "password": password,
                       "extra": json.dumps({"sasl_mechanism": "SCRAM-SHA-512",
                                            "ssl.ca.location": str(kafka.ca.cert_path)})})


@pytest.mark.timeout(600)
def test_a_spark_submit_job_reads_the_committed_range_and_no_secret_is_kept(af: AirflowEnv,
                                                                         kafka_secure: SecuredKafka,
                                                                         tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    topic, connector, user = f"spark-handoff-{tag}", f"spark-handoff-{tag}", f"spark-handoff-{tag}"
    _prepare(kafka_secure, topic)
    password = kafka_secure.add_user(user)
    for acl in [*role_acls("exactly_once_source", connector=connector, topic=topic), *role_acls("spark", topic=topic)]:
        kafka_secure.grant(user, _snake(acl.resource_type), acl.name, _snake(acl.operation), pattern=acl.pattern)
    wrong = f"wrong-{uuid.uuid4().hex}"
    out = tmp_path / "read.json"
    env = {"AIRFLOW_CONN_PYCONNECT_SPARK_SECURE": _conn(kafka_secure, user, password),
           "AIRFLOW_CONN_PYCONNECT_SPARK_REFUSED": _conn(kafka_secure, user, wrong),
           "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
           "PYCONNECT_TEST_SPARK_CONN": "pyconnect_spark_secure", "PYCONNECT_TEST_SPARK_REFUSED": "pyconnect_spark_refused",
           "PYCONNECT_TEST_SPARK_TOPIC": topic, "PYCONNECT_TEST_SPARK_CONNECTOR": connector,
           "PYCONNECT_TEST_SPARK_APP": str(JOB), "PYCONNECT_TEST_SPARK_OUT": str(out)}
    run = af.airflow("dags", "test", DAG_ID, extra_env=env, check=False, timeout=480)
    text = run.stdout + run.stderr

    states = dict(af.query("SELECT task_id, state FROM task_instance WHERE dag_id = ? AND run_id = "
                           "(SELECT max(run_id) FROM dag_run WHERE dag_id = ?)", DAG_ID, DAG_ID))
    assert states == {"src": "success", "handoff": "success", "spark": "success", "spark_refused": "failed",
                      "spark_cluster": "failed"}, (
        states, text[-8000:])

    # the job read exactly the committed range, each record once, with the settings handed in its environment
    read = json.loads(out.read_text())
    assert sorted(read["ids"]) == list(range(RECORDS)), "records lost or read twice"
    assert committed_ids(kafka_secure, topic, 2) == list(range(RECORDS))
    assert read["handed"] == ["sasl.mechanism", "sasl.password", "sasl.username", "security.protocol", "ssl.ca.pem"]
    assert read["still_in_env"] is False  # handed_settings() took it out of the job's environment
    assert SETTINGS_ENV in read["parent_env_names"]  # it reached the driver through spark-submit's environment ...
    assert "SparkSubmit" in read["parent_cmdline"] and str(JOB) in read["parent_cmdline"]
    assert password not in read["parent_cmdline"]  # ... and not through its command line (what `ps` shows)

    # the wrong password: one error naming the broker and the cause; spark-submit never started
    bootstrap = kafka_secure.listener("SASL").bootstrap
    assert f"Kafka cluster at {bootstrap} could not be used" in text and "authentication failed" in text, text[-8000:]
    assert "is a secured Kafka backend and deploy mode is 'cluster'" in text, text[-8000:]
    commands = [line for line in text.splitlines() if "Spark-Submit cmd:" in line]
    assert len(commands) == 1 and str(JOB) in commands[0], commands  # the hook's log of the command, one task's

    assert "Handing the Kafka security settings of connection 'pyconnect_spark_secure'" in text  # the task logs
    xcoms = str(af.query("SELECT task_id, key, value FROM xcom WHERE dag_id = ?", DAG_ID))
    rendered = str(af.query("SELECT task_id, rendered_fields FROM rendered_task_instance_fields WHERE dag_id = ?",
                            DAG_ID))
    assert "--ranges" in rendered and topic in rendered, rendered[:2000]  # the fields were stored: the check counts
    for what, secret in {"the password": password, "the wrong password": wrong}.items():
        for where, haystack in [("the output of airflow dags test (the task logs)", text), ("XCom", xcoms),
                                ("the rendered template fields", rendered),
                                ("the spark-submit command the hook logged", "\n".join(commands))]:
            assert secret not in haystack, f"{what} reached {where}"
