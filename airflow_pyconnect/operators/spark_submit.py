"""PyConnectSparkSubmitOperator: Airflow's ``SparkSubmitOperator`` whose job may read a secured Kafka backend.

The Spark hand-off (:mod:`airflow_pyconnect.spark`) gives a job the backend URL and the committed ranges, never
the connection's client settings: they hold secrets (the SASL password, the mTLS key), and whatever a
``SparkSubmitOperator`` takes as an argument lands in its rendered template fields (the metadata database, the
UI), on the ``spark-submit`` command line (``ps``; the Spark hook logs it) or in Spark's conf (the Spark UI's
Environment tab, event logs, and on YARN and Kubernetes ``env_vars`` become ``--conf`` arguments).

This operator takes one more argument, ``pyconnect_conn_id``, a name. In ``execute``, in the worker running the
task, at run time:

1. it resolves that ``pyconnect`` connection (:class:`~airflow_pyconnect.hooks.pyconnect.PyConnectHook`, which
   registers its secrets with Airflow's masker; a key read from the file ``ssl.key.location`` names is registered
   too);
2. on a Kafka backend with security settings (anything but PLAINTEXT), it keeps their security part, every PEM
   file read inline (:func:`connect_runtime.spark_kafka.handoff_settings`: OAUTHBEARER and other settings Spark's
   Kafka source cannot take fail here, naming the setting), refuses cluster deploy mode (below), and checks that the
   broker takes these credentials (reading the cluster's metadata): a wrong password fails the task before
   ``spark-submit`` starts, with one error naming the broker and the cause;
3. it runs ``spark-submit`` exactly as ``SparkSubmitOperator`` does, with the settings as JSON in the environment
   variable :data:`~connect_runtime.spark_kafka.SETTINGS_ENV` of this process while it runs (``spark-submit``
   inherits it; in client deploy mode the driver is that process's child, on this worker). The job reads them with
   :func:`connect_runtime.spark_kafka.handed_settings` and passes them to
   :func:`connect_runtime.spark.read_kafka_range` (``settings=``), whose Kafka options Spark's UI and plan redact.

Nothing secret is templated, pushed to XCom, put on a command line or logged; a process environment is readable
only by its user (and root). On a PLAINTEXT backend, or the SQLite one, the operator is exactly
``SparkSubmitOperator``.

**Cluster deploy mode is refused** when there is something to hand over: the driver then runs on a cluster machine
and the only ways ``spark-submit`` reaches it (``--conf``, ``spark.yarn.appMasterEnv.*``,
``spark.kubernetes.driverEnv.*``, a properties file) are Spark conf, shown in the Environment tab and on the
command line. There, give the driver the variable from the cluster's secret store (on Kubernetes
``spark.kubernetes.driver.secretKeyRef.PYCONNECT_SPARK_KAFKA_SETTINGS=<secret>:<key>``) and submit with
``SparkSubmitOperator``: the job's ``handed_settings()`` reads it the same way.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

try:
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
except ImportError as exc:
    raise ImportError("PyConnectSparkSubmitOperator needs Airflow's Spark provider "
                      "(apache-airflow-providers-apache-spark), which is not installed: "
                      "pip install 'airflow-pyconnect[spark]'", name=exc.name) from exc

from airflow_pyconnect.hooks.pyconnect import (
    DEFAULT_CONN_ID,
    PyConnectHook,
    open_backend_at,
    register_secrets,
)

if TYPE_CHECKING:
    from airflow.sdk import Context


@contextlib.contextmanager
def _environment(name: str, value: str) -> Iterator[None]:
    """``name=value`` in this process's environment while the block runs, then as it was."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


class PyConnectSparkSubmitOperator(SparkSubmitOperator):
    """``SparkSubmitOperator`` that hands its job the Kafka credentials of a ``pyconnect`` connection, resolved in
    the worker at run time and given to ``spark-submit`` in its environment, never in an argument (the module
    docstring says why and how).

    :param pyconnect_conn_id: the ``pyconnect`` connection whose backend the job reads (the one the source
        operator used, or one of a principal granted the Spark role's ACLs, docs/kafka.md); not templated.
    :param kwargs: ``SparkSubmitOperator``'s arguments (``application``, ``conn_id``, ``deploy_mode``, ...; with
        :func:`airflow_pyconnect.spark.spark_submit_kwargs` for the ranges, the backend URL and the jars).
    """

    def __init__(self, *, pyconnect_conn_id: str = DEFAULT_CONN_ID, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pyconnect_conn_id = pyconnect_conn_id

    def execute(self, context: Context) -> None:
        from airflow.sdk.exceptions import AirflowFailException

        from connect_runtime.api.config import HIDDEN, mask
        from connect_runtime.spark_kafka import SETTINGS_ENV, SecuritySettingsError, handoff_settings

        url, settings = PyConnectHook(pyconnect_conn_id=self.pyconnect_conn_id).backend_config()
        if not url.lower().startswith("kafka:"):
            return super().execute(context)
        try:
            handed = handoff_settings(settings)
        except SecuritySettingsError as exc:
            raise AirflowFailException(f"connection {self.pyconnect_conn_id!r}: {exc}") from exc
        except OSError as exc:  # a PEM file ssl.*.location names (the message names its path)
            raise AirflowFailException(f"connection {self.pyconnect_conn_id!r}: a PEM file its settings name cannot "
                                       f"be read on this worker: {exc}") from exc
        if not handed:
            return super().execute(context)
        register_secrets(*(handed[k] for k, v in mask(handed).items() if v == HIDDEN))  # a key read from its file
        if SETTINGS_ENV in (self.env_vars or {}):
            raise AirflowFailException(f"env_vars must not set {SETTINGS_ENV}: it is templated (stored and shown); "
                                       "this operator sets it from the connection at run time")
        if self._hook is None:
            self._hook = self._get_hook()
        mode = str(self._hook._connection.get("deploy_mode") or (self.conf or {}).get("spark.submit.deployMode")
                   or "client")
        if mode.lower() == "cluster":
            raise AirflowFailException(
                f"connection {self.pyconnect_conn_id!r} is a secured Kafka backend and deploy mode is 'cluster': the "
                "driver would run on a cluster machine, where spark-submit reaches it only through Spark conf or its "
                "command line, both shown (the Spark UI, ps). Use deploy_mode='client' (the driver runs on this "
                f"worker), or give the driver {SETTINGS_ENV} from the cluster's secret store (Kubernetes: "
                f"spark.kubernetes.driver.secretKeyRef.{SETTINGS_ENV}) and submit with SparkSubmitOperator")
        self._check_credentials(url, settings)
        self.log.info("Handing the Kafka security settings of connection %r (%s) to spark-submit in its environment "
                      "(%s)", self.pyconnect_conn_id, ", ".join(sorted(handed)), SETTINGS_ENV)
        with _environment(SETTINGS_ENV, json.dumps(handed)):
            return super().execute(context)

    def _check_credentials(self, url: str, settings: dict[str, Any]) -> None:
        """Read the cluster's metadata with the connection's settings: a refused login, an untrusted certificate or
        a broker that does not answer fails here, before ``spark-submit``, with the backend's error (it names the
        bootstrap servers and the cause, never a secret)."""
        from airflow.sdk.exceptions import AirflowException

        from connect_runtime.api.errors import BackendError

        try:
            with open_backend_at(url, settings, read_only=True) as backend:
                backend.list_topics()
        except BackendError as exc:
            raise AirflowException(f"connection {self.pyconnect_conn_id!r}: {exc}") from exc


__all__ = ["PyConnectSparkSubmitOperator"]
