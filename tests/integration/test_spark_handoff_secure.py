"""The Spark hand-off on a secured Kafka backend, under a real ``airflow dags test`` (DAG
``pyconnect_test_spark_secure``, tests/support/dag_files): a least-privilege SCRAM-SHA-512 principal (the exactly-once
source's ACLs and the Spark role's Read, docs/kafka.md) writes a range with ``PyConnectSourceOperator``; a
``PyConnectSparkSubmitOperator`` given the same ``pyconnect_conn_id`` runs a real ``spark-submit`` (local master,
Spark's Kafka source from ``spark_kafka_jars()``) whose job reads exactly that range with the settings the operator
resolved in the worker and put in spark-submit's environment. A second is given a connection of the same principal
by its client certificate (mTLS, the key read from its file in the worker); its job only checks that the certificate
and key arrived in its environment (a second Spark read would double the test's time; Spark's read with these options
over mTLS is tests/integration/test_spark_kafka_secure.py's). A third, whose connection holds
a wrong password, fails before ``spark-submit`` with one error naming the broker and the cause; a fourth, in cluster
deploy mode, is refused, saying why and what to do instead.

The passwords and the client key's lines appear nowhere Airflow keeps or shows: not in the output of ``airflow dags
test`` (it holds the task logs), XCom, the rendered template fields in the metadata database, nor on the
``spark-submit`` command line (as the Spark hook logged it, and as each job read its parent JVM's in ``/proc``).
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from pathlib import Path
from typing import Any

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
    """``TransactionalId`` -> ``transactional_id``: resource types and operations as :meth:`SecuredKafka.grant`
    names them."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _conn(host: str, extra: dict[str, str], login: str | None = None, password: str | None = None) -> str:
    return json.dumps({"conn_type": "pyconnect", "host": f"kafka://{host}", "login": login, "password": password,
                       "extra": json.dumps(extra)})


def _read(out: Path, task_id: str, handed: list[str]) -> dict[str, Any]:
    """What the Spark task ``task_id``'s job wrote: the settings ``handed`` came in its environment (and were taken
    out of it). The ids it read are the caller's to check."""
    read: dict[str, Any] = json.loads((out / f"{task_id}.json").read_text())
    assert read["handed"] == handed
    assert read["still_in_env"] is False  # handed_settings() took it out of the job's environment
    assert SETTINGS_ENV in read["parent_env_names"]  # it reached the driver through spark-submit's environment
    assert "SparkSubmit" in read["parent_cmdline"] and str(JOB) in read["parent_cmdline"]
    return read


@pytest.mark.timeout(600)
def test_a_spark_submit_job_reads_the_committed_range_and_no_secret_is_kept(af: AirflowEnv,
                                                                         kafka_secure: SecuredKafka,
                                                                         tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    topic, connector, user = f"spark-handoff-{tag}", f"spark-handoff-{tag}", f"spark-handoff-{tag}"
    _prepare(kafka_secure, topic)
    password = kafka_secure.add_user(user)
    cert = kafka_secure.issue(user)  # the same principal (User:<CN>) by its client certificate, for spark_mtls
    for acl in [*role_acls("exactly_once_source", connector=connector, topic=topic), *role_acls("spark", topic=topic)]:
        kafka_secure.grant(user, _snake(acl.resource_type), acl.name, _snake(acl.operation), pattern=acl.pattern)
    wrong = f"wrong-{uuid.uuid4().hex}"
    sasl, mtls, ca = kafka_secure.listener("SASL").bootstrap, kafka_secure.listener("MTLS").bootstrap, str(
        kafka_secure.ca.cert_path)
    scram = {"sasl_mechanism": "SCRAM-SHA-512", "ssl.ca.location": ca}
    out = tmp_path / "out"
    out.mkdir()
    env = {"AIRFLOW_CONN_PYCONNECT_SPARK_SECURE": _conn(sasl, scram, user, password),
           "AIRFLOW_CONN_PYCONNECT_SPARK_REFUSED": _conn(sasl, scram, user, wrong),
           "AIRFLOW_CONN_PYCONNECT_SPARK_MTLS": _conn(mtls, {"security_protocol": "SSL", "ssl.ca.location": ca,
                                                             "ssl.certificate.location": str(cert.cert),
                                                             "ssl.key.location": str(cert.key)}),
           "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
           "PYCONNECT_TEST_SPARK_CONN": "pyconnect_spark_secure",
           "PYCONNECT_TEST_SPARK_REFUSED": "pyconnect_spark_refused", "PYCONNECT_TEST_SPARK_MTLS": "pyconnect_spark_mtls", "PYCONNECT_TEST_SPARK_MTLS_BACKEND": f"kafka://{mtls}",
           "PYCONNECT_TEST_SPARK_TOPIC": topic, "PYCONNECT_TEST_SPARK_CONNECTOR": connector,
           "PYCONNECT_TEST_SPARK_APP": str(JOB), "PYCONNECT_TEST_SPARK_OUT": str(out)}
    run = af.airflow("dags", "test", DAG_ID, extra_env=env, check=False, timeout=480)
    text = run.stdout + run.stderr

    states = dict(af.query("SELECT task_id, state FROM task_instance WHERE dag_id = ? AND run_id = "
                           "(SELECT max(run_id) FROM dag_run WHERE dag_id = ?)", DAG_ID, DAG_ID))
    assert states == {"src": "success", "handoff": "success", "spark": "success", "spark_mtls": "success",
                      "spark_refused": "failed", "spark_cluster": "failed"}, (states, text[-8000:])

    # each job read exactly the committed range, each record once, with the settings handed in its environment
    assert committed_ids(kafka_secure, topic, 2) == list(range(RECORDS))
    scram_read = _read(out, "spark", ["sasl.mechanism", "sasl.password", "sasl.username", "security.protocol",
                                      "ssl.ca.pem"])
    assert sorted(scram_read["ids"]) == list(range(RECORDS)), "records lost or read twice"
    mtls_read = _read(out, "spark_mtls", ["security.protocol", "ssl.ca.pem", "ssl.certificate.pem", "ssl.key.pem"])
    assert mtls_read["key_sha256"] == hashlib.sha256(cert.key_pem.encode()).hexdigest()  # the key file's text

    # the wrong password: one error naming the broker and the cause; spark-submit never started; nor in cluster mode
    assert f"Kafka cluster at {sasl} could not be used" in text and "authentication failed" in text, text[-8000:]
    assert "is a secured Kafka backend and deploy mode is 'cluster'" in text, text[-8000:]
    commands = [line for line in text.splitlines() if "Spark-Submit cmd:" in line]
    assert len(commands) == 2 and all(str(JOB) in c for c in commands), commands  # spark's and spark_mtls's

    assert "Handing the Kafka security settings of connection 'pyconnect_spark_secure'" in text  # the task logs
    xcoms = str(af.query("SELECT task_id, key, value FROM xcom WHERE dag_id = ?", DAG_ID))
    rendered = str(af.query("SELECT task_id, rendered_fields FROM rendered_task_instance_fields WHERE dag_id = ?",
                            DAG_ID))
    assert "--ranges" in rendered and topic in rendered, rendered[:2000]  # the fields were stored: the check counts
    secrets = {"the password": password, "the wrong password": wrong,
               **{f"a line of the client key ({i})": line for i, line in enumerate(cert.key_pem.splitlines())
                  if line.strip() and not line.startswith("-----")}}
    for what, secret in secrets.items():
        for where, haystack in [("the output of airflow dags test (the task logs)", text), ("XCom", xcoms),
                                ("the rendered template fields", rendered),
                                ("the spark-submit command the hook logged", "\n".join(commands)),
                                ("the spark-submit JVM's command line", scram_read["parent_cmdline"]),
                                ("the mTLS spark-submit JVM's command line", mtls_read["parent_cmdline"])]:
            assert secret not in haystack, f"{what} reached {where}"


def test_the_check_before_spark_submit_needs_no_more_than_the_spark_roles_read(kafka_secure: SecuredKafka) -> None:
    """The operator reads the cluster's metadata before ``spark-submit``: a principal granted only the Spark role's
    Read on the topic passes it (Kafka lists only the topics it may describe); a wrong password is refused, naming the
    broker, never the password."""
    from airflow.sdk.exceptions import AirflowException

    from airflow_pyconnect.operators.spark_submit import PyConnectSparkSubmitOperator

    tag = uuid.uuid4().hex[:8]
    topic, reader = f"spark-check-{tag}", f"spark-reader-{tag}"
    _prepare(kafka_secure, topic)
    kafka_secure.add_user(reader)
    settings = {k: v for k, v in kafka_secure.sasl_settings(reader).items() if k != "bootstrap.servers"}
    op = PyConnectSparkSubmitOperator(task_id="check", pyconnect_conn_id="unused")
    [acl] = role_acls("spark", topic=topic)
    kafka_secure.grant(reader, _snake(acl.resource_type), acl.name, _snake(acl.operation), pattern=acl.pattern)
    op._check_credentials(kafka_secure.url, settings)
    with pytest.raises(AirflowException, match="authentication failed") as failed:
        op._check_credentials(kafka_secure.url, {**settings, "sasl.password": "not-it"})
    assert "not-it" not in str(failed.value) and kafka_secure.listener("SASL").bootstrap in str(failed.value)
