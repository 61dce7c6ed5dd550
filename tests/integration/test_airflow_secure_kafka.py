"""A real ``airflow dags test`` over the secured Apache Kafka node (tests/support/kafka_secure.py), every
authentication set in a ``pyconnect`` connection the way docs/kafka.md ("Authentication and TLS") says:

- ``pyconnect_scram``: login/password with the ``sasl_mechanism`` form field (SCRAM-SHA-512), the CA as PEM text;
- ``pyconnect_mtls``: a client certificate and its encrypted key inline (``ssl.certificate.pem``, ``ssl.key.pem``,
  ``ssl.key.password``), ``security_protocol`` SSL;
- ``pyconnect_oauth``: OAUTHBEARER through ``oauth_cb``, the dotted path of a token callable, imported in the task;
- ``pyconnect_oidc``: OAUTHBEARER through librdkafka's OIDC method, the OAuth client's id and secret in
  login/password, the token endpoint a tiny server of this test on loopback;
- ``pyconnect_refused``: a wrong password: its source task fails at once with one error naming the bootstrap
  server and the cause (its sink does not run).

Each connection carries an exactly-once source run and a sink run up to its ranges (DAG
``pyconnect_test_secure_kafka``): every record once in the sink's files and in the topic read ``read_committed``.
No secret (password, key line, key password, client secret, token) appears in the command's output (which holds
the task logs: ``airflow dags test`` writes no log files), XCom or the rendered templates.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest

from tests.support.airflow_env import AirflowEnv, shared_airflow_env
from tests.support.kafka_secure import (
    OAUTH_CB,
    SecuredKafka,
    TokenEndpoint,
    committed_ids,
    fixed_jwt,
    sunk_ids,
)

pytestmark = [pytest.mark.kafka, pytest.mark.airflow]

DAG_ID = "pyconnect_test_secure_kafka"
RECORDS = 200


@pytest.fixture(scope="module")
def af(tmp_path_factory: pytest.TempPathFactory) -> AirflowEnv:
    return shared_airflow_env(tmp_path_factory)


def _conn(host: str, extra: dict[str, str], login: str | None = None, password: str | None = None) -> str:
    return json.dumps({"conn_type": "pyconnect", "host": f"kafka://{host}", "login": login, "password": password,
                       "extra": json.dumps(extra)})


def test_every_authentication_through_the_connection(af: AirflowEnv, kafka_secure: SecuredKafka,
                                                     tmp_path: Path) -> None:
    suffix, out = uuid.uuid4().hex[:8], tmp_path / "out"
    cert = kafka_secure.issue("admin", key_password=f"kp-{uuid.uuid4().hex[:10]}")
    expiry, jti = time.time() + 3600, uuid.uuid4().hex
    token = fixed_jwt("admin", expiry, jti)[0]
    with TokenEndpoint() as endpoint:
        ca = str(kafka_secure.ca.cert_path)
        conns = {
            "pyconnect_scram": _conn(kafka_secure.listener("SASL").bootstrap,
                                     {"sasl_mechanism": "SCRAM-SHA-512", "ssl.ca.pem": kafka_secure.ca.pem},
                                     "admin", kafka_secure.passwords["admin"]),
            "pyconnect_mtls": _conn(kafka_secure.listener("MTLS").bootstrap,
                                    {"security_protocol": "SSL", "ssl.certificate.pem": cert.cert_pem,
                                     "ssl.key.pem": cert.key_pem, "ssl.key.password": str(cert.key_password),
                                     "ssl.ca.location": ca}),
            "pyconnect_oauth": _conn(kafka_secure.listener("OAUTH").bootstrap,
                                     {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
                                      "oauth_cb": OAUTH_CB, "sasl.oauthbearer.config": "principal=admin",
                                      "ssl.ca.location": ca}),
            "pyconnect_oidc": _conn(kafka_secure.listener("OAUTH").bootstrap,
                                    {"security_protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER",
                                     "sasl.oauthbearer.method": "oidc",
                                     "sasl.oauthbearer.token.endpoint.url": endpoint.url, "ssl.ca.location": ca},
                                    endpoint.client_id, endpoint.client_secret),
        }
        wrong = f"wrong-{uuid.uuid4().hex}"
        refused = {"pyconnect_refused": _conn(kafka_secure.listener("SASL").bootstrap,
                                              {"sasl_mechanism": "SCRAM-SHA-256", "ssl.ca.location": ca},
                                              "admin", wrong)}
        env = {**{f"AIRFLOW_CONN_{c.upper()}": v for c, v in {**conns, **refused}.items()},
               "PYCONNECT_TEST_CONNS": ",".join([*conns, *refused]), "PYCONNECT_TEST_SUFFIX": suffix,
               "PYCONNECT_TEST_OUT": str(out), "PYCONNECT_TEST_OAUTH_EXPIRY": str(expiry),
               "PYCONNECT_TEST_OAUTH_JTI": jti}
        run = af.airflow("dags", "test", DAG_ID, extra_env=env, check=False, timeout=420)
        issued = list(endpoint.issued)
    text = run.stdout + run.stderr
    assert issued, "the OIDC token endpoint was never asked"

    states = dict(af.query("SELECT task_id, state FROM task_instance WHERE dag_id = ? AND run_id = "
                                 "(SELECT max(run_id) FROM dag_run WHERE dag_id = ?)", DAG_ID, DAG_ID))
    assert states == {**{f"{kind}_{c}": "success" for c in conns for kind in ("src", "sink")},
                      "src_pyconnect_refused": "failed", "sink_pyconnect_refused": "upstream_failed"}, (states,
                                                                                                       text[-6000:])
    # the refused connection: one error naming the bootstrap server and the cause, never the password
    assert f"Kafka cluster at {kafka_secure.listener('SASL').bootstrap} could not be used" in text, text[-6000:]
    assert "authentication failed" in text and "SCRAM-SHA-256" in text, text[-6000:]
    for conn in conns:
        topic = f"secure-{conn}-{suffix}"
        assert sunk_ids(out / conn, topic) == list(range(RECORDS)), f"{conn}: records lost or sunk twice"
        assert committed_ids(kafka_secure, topic, 2) == list(range(RECORDS)), f"{conn}: records lost or twice"

    secrets = {"the SCRAM password": kafka_secure.passwords["admin"], "the wrong password": wrong,
               "the key password": str(cert.key_password),
               "the OAuth client secret": endpoint.client_secret, "the oauth_cb token": token,
               **{f"a line of the private key ({i})": line for i, line in enumerate(cert.key_pem.splitlines())
                  if not line.startswith("-----")},
               **{f"an OIDC token ({i})": t for i, t in enumerate(issued)}}
    assert "Sink connector files-pyconnect_oidc" in text, text[-4000:]  # dags test prints the task logs
    xcoms = str(af.query("SELECT task_id, key, value FROM xcom WHERE dag_id = ?", DAG_ID))
    rendered = str(af.query("SELECT rendered_fields FROM rendered_task_instance_fields WHERE dag_id = ?", DAG_ID))
    for what, secret in secrets.items():
        for where, haystack in [("the output of airflow dags test (the task logs)", text),
                                ("XCom", xcoms), ("the rendered templates", rendered)]:
            assert secret not in haystack, f"{what} reached {where}"
