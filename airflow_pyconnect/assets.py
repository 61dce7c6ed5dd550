"""The Airflow Asset of a topic written by a pyconnect source run.

A topic ``orders`` on the backend of connection ``pyconnect_default`` is the asset
``pyconnect://pyconnect_default/orders`` (name and URI alike). The connection id stands for the
backend: it is known when the DAG file is parsed (the backend URL is not, without a connection
lookup), and two connections to the same cluster are two names for it, not two clusters.

:class:`~airflow_pyconnect.operators.source.PyConnectSourceOperator` adds the asset of a literal
``topic`` of its config to its outlets by itself; a templated topic needs an explicit outlet: the
asset (``pyconnect_asset("orders-{{ ds }}")`` does not work, an asset name is fixed at parse time),
or an ``AssetAlias``, through which the operator then attaches the events of the topics it wrote.
Each event's ``extra`` holds ``{"connector", "topic", "ranges": {"<p>": [from, to]}, "records"}``.
"""

from __future__ import annotations

from airflow.sdk import Asset

SCHEME = "pyconnect"


def pyconnect_asset(topic: str, pyconnect_conn_id: str = "pyconnect_default") -> Asset:
    """The Asset of ``topic`` on the backend of ``pyconnect_conn_id``."""
    uri = f"{SCHEME}://{pyconnect_conn_id}/{topic}"
    return Asset(name=uri, uri=uri)


def topic_of(asset: object, pyconnect_conn_id: str) -> str | None:
    """The topic an outlet asset names on this connection's backend, or ``None``."""
    uri = getattr(asset, "uri", None)
    prefix = f"{SCHEME}://{pyconnect_conn_id}/"
    if isinstance(uri, str) and uri.startswith(prefix):
        return uri[len(prefix):]
    return None


__all__ = ["SCHEME", "pyconnect_asset", "topic_of"]
