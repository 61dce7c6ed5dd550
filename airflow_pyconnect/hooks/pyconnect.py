"""PyConnectHook: an Airflow connection of type ``pyconnect`` → a ``connect_runtime`` backend.

The connection says where records and offsets live:

- **host**: the backend URL, ``sqlite:///path/to/file.db`` (the embedded backend) or
  ``kafka://host:9092[,host2:9092]``. A bare ``host:port[,host:port]`` list means Kafka bootstrap
  servers; a bare absolute path (``/var/pyconnect.db``) means the SQLite file.
- **login** / **password**: SASL credentials (Kafka only): become ``sasl.username`` /
  ``sasl.password``; ``sasl.mechanism`` defaults to ``PLAIN`` and ``security.protocol`` to
  ``SASL_SSL`` unless the extra says otherwise. With ``sasl.mechanism`` ``OAUTHBEARER`` they are the
  OAuth client's id and secret instead (``sasl.oauthbearer.client.id`` / ``.client.secret``, for
  ``sasl.oauthbearer.method`` ``oidc``).
- **extra**: a JSON object of backend client settings: any librdkafka property
  (``security.protocol``, ``ssl.ca.location``, ``sasl.jaas.config``, ``producer.override.*`` ...) for
  Kafka, or ``busy.timeout.ms`` / ``synchronous`` / ``default.partitions`` for SQLite. Kafka
  authentication: SCRAM/PLAIN through login/password; mTLS with ``ssl.certificate.pem`` /
  ``ssl.key.pem`` / ``ssl.ca.pem`` (the PEM text) or ``ssl.certificate.location`` /
  ``ssl.key.location`` / ``ssl.ca.location`` (paths on the worker), ``ssl.key.password`` for an
  encrypted key; OAUTHBEARER with ``sasl.oauthbearer.method=oidc`` and its token endpoint, or with
  ``oauth_cb``: the dotted path of a token callable (confluent-kafka's convention: called with
  ``sasl.oauthbearer.config``, returns ``(token, expiry epoch seconds)``), imported by the backend
  in the worker process only (docs/kafka.md, "Authentication and TLS").

When the connection ``pyconnect_default`` is not defined, the hook uses the embedded backend at
``$AIRFLOW_HOME/pyconnect/pyconnect.db`` and says so once per process, **but only where every task
shares that file**: a single-machine executor (``LocalExecutor``, ``SequentialExecutor``), as
``[core] executor`` names it (``dag.test()`` included: Airflow has no public signal for it). Under any
other executor (Celery, Kubernetes, Edge, ...) each worker would get a store of its own, so a missing ``pyconnect_default`` fails with an error naming the connection to
create; set ``[pyconnect] allow_embedded_default = True`` (``AIRFLOW__PYCONNECT__ALLOW_EMBEDDED_DEFAULT``)
to use the embedded file anyway (e.g. every worker on one machine). Any other connection id that
is not defined is an error naming it.

The **port** field is read: with a single bare host (``broker1``) it completes the bootstrap server
(``broker1:9092``). :meth:`PyConnectHook.get_conn` returns the open backend (close it after use).

Secrets (the password, and every extra setting whose name looks secret: ``*password*``,
``sasl.jaas.config``, ``ssl.key*``, ``*secret*``, ``*token*``) are registered with Airflow's secret
masker as soon as the connection is read (a multi-line value such as ``ssl.key.pem`` line by line too),
and :meth:`PyConnectHook.describe` returns them masked.

Nothing here imports ``connect_runtime``'s backends (or ``confluent_kafka``) at module level.
"""

from __future__ import annotations

import copy
import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook

from airflow_pyconnect.get_provider_info import UI_FIELD_BEHAVIOUR

if TYPE_CHECKING:
    from connect_runtime.backends.base import Backend

DEFAULT_CONN_ID = "pyconnect_default"
EMBEDDED_DB = Path("pyconnect") / "pyconnect.db"

_FORM_FIELDS = {"security_protocol": "security.protocol", "sasl_mechanism": "sasl.mechanism"}
"""Connection-form fields (``conn-fields`` of the provider info) → librdkafka setting names."""

SINGLE_MACHINE_EXECUTORS = frozenset({"LocalExecutor", "SequentialExecutor", "DebugExecutor"})
"""Executors whose tasks all run on one machine (and so share ``$AIRFLOW_HOME``)."""

_log = logging.getLogger(__name__)
_default_logged = threading.Event()


RESOLVED_URLS: dict[str, str] = {}
"""Per connection id, the backend URL a hook of this process resolved (no secrets: settings are not kept): what
the ``pyconnect://`` assets' OpenLineage converter may use without a connection lookup."""


def airflow_home() -> Path:
    """``$AIRFLOW_HOME`` (Airflow's own default ``~/airflow`` when unset)."""
    return Path(os.environ.get("AIRFLOW_HOME") or "~/airflow").expanduser()


def embedded_backend_url() -> str:
    """The embedded backend used when ``pyconnect_default`` is not defined."""
    return f"sqlite:///{airflow_home() / EMBEDDED_DB}"


def executor_class_name(entry: str) -> str:
    """The class name of an executor as Airflow names it: ``LocalExecutor``,
    ``airflow.executors.local_executor.LocalExecutor`` or ``alias:module.Class``."""
    return entry.strip().rpartition(":")[2].rpartition(".")[2]


def executor_names() -> list[str]:
    """The executors ``[core] executor`` names, as class names (the first is the default)."""
    from airflow.sdk.configuration import conf

    raw = conf.get("core", "executor", fallback="LocalExecutor") or "LocalExecutor"
    return [executor_class_name(entry) for entry in raw.split(",") if entry.strip()]


def embedded_default_allowed() -> tuple[bool, str]:
    """Whether a missing ``pyconnect_default`` may fall back to the embedded SQLite file, and why."""
    from airflow.sdk.configuration import conf

    if conf.getboolean("pyconnect", "allow_embedded_default", fallback=False):
        return True, "[pyconnect] allow_embedded_default is set"
    names = executor_names()
    if names and all(n in SINGLE_MACHINE_EXECUTORS for n in names):
        return True, f"the executor ({', '.join(names)}) runs every task on this machine"
    return False, f"the executor ({', '.join(names) or '?'}) may run tasks on several machines"


def backend_url_from_host(host: str, port: int | None = None) -> str:
    """The backend URL a connection's host field names (see the module docstring)."""
    host = host.strip()
    if not host:
        raise ValueError("the connection's host is empty: expected sqlite:///path/file.db, "
                         "kafka://host:port[,host:port] or a host:port list")
    lowered = host.lower()
    if lowered.startswith(("sqlite:", "kafka:")):
        return host
    if "://" in host:
        raise ValueError(f"unsupported backend URL {host!r}: expected sqlite:///path/file.db or "
                         "kafka://host:port[,host:port]")
    if host.startswith("/"):
        return f"sqlite:///{host}"
    servers = [s.strip() for s in host.split(",") if s.strip()]
    if port and len(servers) == 1 and ":" not in servers[0]:
        servers = [f"{servers[0]}:{port}"]
    return "kafka://" + ",".join(servers)


def _secret_keys(settings: dict[str, Any]) -> list[str]:
    from connect_runtime.api.config import HIDDEN, mask

    masked = mask(settings)
    return [k for k, v in masked.items() if v == HIDDEN]


def register_secrets(*values: Any) -> None:
    """Tell Airflow's secret masker about secret values (no-op where the masker is unavailable)."""
    try:
        from airflow.sdk.log import mask_secret
    except ImportError:  # pragma: no cover - older or trimmed SDKs
        return
    for value in values:
        if value not in (None, ""):
            mask_secret(value if isinstance(value, (str, dict, list)) else str(value))
        if isinstance(value, str) and "\n" in value.strip():  # a PEM key: any one line of it is secret too
            for line in value.splitlines():
                if len(line.strip()) >= 16 and not line.startswith("-----"):
                    mask_secret(line.strip())


def open_backend_at(url: str, settings: dict[str, Any] | None = None, *, read_only: bool = False) -> Backend:
    """An open ``connect_runtime`` backend at ``url`` (close it). The hook is the provider's one door to
    the backends: operators, sensors, triggers and the UI plugin open stores through it (an import-linter
    contract keeps it so)."""
    from connect_runtime.backends import open_backend

    return open_backend(url, settings, read_only=read_only)


class PyConnectHook(BaseHook):
    """Opens the ``connect_runtime`` backend an Airflow connection of type ``pyconnect`` names.

    :param pyconnect_conn_id: the connection id; when it is ``pyconnect_default`` and not defined,
        the embedded backend ``$AIRFLOW_HOME/pyconnect/pyconnect.db`` is used.
    """

    conn_name_attr = "pyconnect_conn_id"
    default_conn_name = DEFAULT_CONN_ID
    conn_type = "pyconnect"
    hook_name = "PyConnect"

    def __init__(self, pyconnect_conn_id: str = DEFAULT_CONN_ID, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pyconnect_conn_id = pyconnect_conn_id
        self._resolved: tuple[str, dict[str, Any]] | None = None

    # -- connection form: its extra fields are the ``conn-fields`` of the provider info ------------------
    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        """How the connection form looks: which fields are hidden, relabelled and what they hold."""
        return copy.deepcopy(UI_FIELD_BEHAVIOUR)

    # -- resolving -----------------------------------------------------------------------------------
    def backend_config(self) -> tuple[str, dict[str, Any]]:
        """``(backend URL, backend client settings)`` of this hook's connection (read once)."""
        if self._resolved is None:
            self._resolved = self._resolve()
            RESOLVED_URLS[self.pyconnect_conn_id] = self._resolved[0]
        return self._resolved

    def _resolve(self, create: bool = True) -> tuple[str, dict[str, Any]]:
        """The connection's backend URL and settings; the embedded default's directory is created when
        ``create`` (not for :meth:`test_connection`, which creates nothing)."""
        from airflow.sdk.exceptions import AirflowNotFoundException

        try:
            conn = self.get_connection(self.pyconnect_conn_id)
        except AirflowNotFoundException:
            if self.pyconnect_conn_id != DEFAULT_CONN_ID:
                raise AirflowNotFoundException(
                    f"The pyconnect connection {self.pyconnect_conn_id!r} is not defined: create it "
                    f"(conn type 'pyconnect', host = backend URL) or use {DEFAULT_CONN_ID!r}"
                ) from None
            allowed, why = embedded_default_allowed()
            if not allowed:
                raise AirflowNotFoundException(
                    f"The pyconnect connection {DEFAULT_CONN_ID!r} is not defined and {why}: each worker "
                    f"would use its own embedded store. Create the connection {DEFAULT_CONN_ID!r} (conn type "
                    "'pyconnect', host = a backend every worker reaches, e.g. kafka://broker:9092), or set "
                    "[pyconnect] allow_embedded_default = True (AIRFLOW__PYCONNECT__ALLOW_EMBEDDED_DEFAULT) "
                    "if every worker shares one machine"
                ) from None
            url = embedded_backend_url()
            if create:
                Path(url[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
            if not _default_logged.is_set():
                _default_logged.set()
                self.log.info("Connection %r is not defined: using the embedded backend %s",
                              DEFAULT_CONN_ID, url)
            return url, {}
        extra = conn.extra_dejson if conn.extra else {}
        if not isinstance(extra, dict):
            raise ValueError(f"the extra of connection {self.pyconnect_conn_id!r} must be a JSON object "
                             "of client settings")
        settings: dict[str, Any] = {}
        for key, value in extra.items():
            # form fields (security_protocol, also stored as extra__pyconnect__security_protocol by
            # older forms) and librdkafka names (security.protocol) all work
            key = key.removeprefix("extra__pyconnect__")
            name = _FORM_FIELDS.get(key, key)
            if value not in (None, ""):
                settings[name] = value
        url = backend_url_from_host(conn.host or "", conn.port)
        if conn.login or conn.password:
            if url.lower().startswith("kafka:"):
                oauth = str(settings.get("sasl.mechanism", "")).upper() == "OAUTHBEARER"
                user, secret = (("sasl.oauthbearer.client.id", "sasl.oauthbearer.client.secret") if oauth
                                else ("sasl.username", "sasl.password"))
                settings.setdefault(user, conn.login or "")
                settings.setdefault(secret, conn.password or "")
                settings.setdefault("sasl.mechanism", "PLAIN")
                settings.setdefault("security.protocol", "SASL_SSL")
            else:
                self.log.warning("Connection %r: login/password are ignored by the SQLite backend",
                                 self.pyconnect_conn_id)
        register_secrets(conn.password, *(settings[k] for k in _secret_keys(settings)))
        return url, settings

    def describe(self) -> dict[str, Any]:
        """The backend URL and settings with every secret masked (safe to log or return)."""
        from connect_runtime.api.config import mask

        url, settings = self.backend_config()
        return {"url": url, "settings": mask(settings)}

    def get_conn(self) -> Backend:
        """The open ``connect_runtime`` backend of this connection (Airflow's hook protocol; close it,
        or use it as a context manager). Same as :meth:`get_backend`."""
        return self.get_backend()

    def get_backend(self) -> Backend:
        """An open ``connect_runtime`` backend (close it, or use it as a context manager)."""
        url, settings = self.backend_config()
        return open_backend_at(url, settings)

    def test_connection(self) -> tuple[bool, str]:
        """Open the backend read-only and list its topics: ``(True, what was found)`` or ``(False, why not)``.

        The UI's Test button runs this in the API server, so it creates nothing: no directory, no SQLite file
        (a path naming no file fails the test, naming the path; the first run creates it), no topic. A Kafka
        cluster that does not answer fails it within the client's bounds (``socket.connection.setup.timeout.ms``,
        the backend's metadata timeout), naming the servers."""
        try:
            url, settings = self._resolved or self._resolve(create=False)
            with open_backend_at(url, settings, read_only=True) as backend:
                topics = backend.list_topics()
        except Exception as exc:
            return False, f"{type(exc).__name__}: {exc}"
        return True, f"Connected to {url}: {len(topics)} topic(s)"


__all__ = ["DEFAULT_CONN_ID", "SINGLE_MACHINE_EXECUTORS", "PyConnectHook", "backend_url_from_host",
           "embedded_backend_url", "embedded_default_allowed", "open_backend_at"]
