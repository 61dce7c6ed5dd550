"""The SQL connectors' connection fields from an Airflow ``postgres`` connection, as templates rendered when the task
runs (nothing is read when the DAG file is parsed, and the secrets reach the connector only in its ``PASSWORD``
fields, where Airflow and the runtime mask them).

The Airflow connection follows the Postgres provider's convention (``PostgresHook``): host, port, schema (the
database), login, password, and libpq's TLS settings as extras, ``{"sslmode": "verify-full", "sslrootcert":
"/etc/ssl/pg-ca.pem", "sslcert": ..., "sslkey": ..., "sslpassword": ...}``, which ``PostgresHook`` hands to the
driver as they are. Here they become ``connection.sslmode`` ... ``connection.sslpassword``
(:mod:`connect_runtime.connectors.sql`); an extra the connection lacks renders empty, which the connector takes as
unset (libpq's defaults apply)::

    load = PyConnectSinkOperator(task_id="load", connector_config={
        "name": "totals-db", "connector.class": "connect_runtime.connectors.sql.SqlSink",
        **sql_connection_config("warehouse_db"), "topics": "totals", ...})
"""

from __future__ import annotations

TLS_EXTRAS = ("sslmode", "sslrootcert", "sslcert", "sslkey", "sslpassword")
"""The connection extras (libpq's names) passed on as ``connection.<name>``."""


def sql_connection_config(conn_id: str, *, scheme: str = "postgresql") -> dict[str, str]:
    """The connector fields ``connection.url`` / ``.user`` / ``.password`` / ``.ssl*`` of the Airflow connection
    ``conn_id`` as Jinja templates (a templated ``connector_config`` renders them when the task runs).

    :param conn_id: an Airflow connection of type ``postgres`` (host, port, schema = database, login, password,
        the TLS extras :data:`TLS_EXTRAS`).
    :param scheme: the SQLAlchemy URL scheme (``postgresql`` means psycopg 3 to the connectors).
    """
    c = f"conn[{conn_id!r}]"
    return {
        "connection.url": f"{scheme}://{{{{ {c}.host }}}}:{{{{ {c}.port or 5432 }}}}/{{{{ {c}.schema }}}}",
        "connection.user": f"{{{{ {c}.login or '' }}}}",
        "connection.password": f"{{{{ {c}.password or '' }}}}",
        **{f"connection.{name}": f"{{{{ {c}.extra_dejson.get('{name}') or '' }}}}" for name in TLS_EXTRAS},
    }


__all__ = ["TLS_EXTRAS", "sql_connection_config"]
