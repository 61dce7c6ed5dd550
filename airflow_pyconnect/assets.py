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

The provider info registers the ``pyconnect`` scheme (``asset-uris``) with :func:`sanitize_uri`, which Airflow
calls on every ``pyconnect://`` URI of an Asset (after its own normalisation: no trailing slash, no fragment):
a URI naming no connection or no topic is refused when the DAG is parsed. :func:`create_asset` is its factory.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.sdk import Asset

if TYPE_CHECKING:
    from urllib.parse import SplitResult

SCHEME = "pyconnect"


def pyconnect_asset(topic: str, pyconnect_conn_id: str = "pyconnect_default") -> Asset:
    """The Asset of ``topic`` on the backend of ``pyconnect_conn_id``."""
    return create_asset(topic=topic, pyconnect_conn_id=pyconnect_conn_id)


def create_asset(*, topic: str, pyconnect_conn_id: str = "pyconnect_default",
                 extra: dict[str, Any] | None = None) -> Asset:
    """The asset factory of the ``pyconnect`` scheme (``asset-uris`` of the provider info)."""
    uri = f"{SCHEME}://{pyconnect_conn_id}/{topic}"
    return Asset(name=uri, uri=uri, extra=extra)


def sanitize_uri(uri: SplitResult) -> SplitResult:
    """Airflow's URI handler for ``pyconnect://<connection id>/<topic>``: both parts are required, and the URI
    has nothing else (no query: a topic is named by its path alone)."""
    topic = uri.path.lstrip("/")
    if not uri.netloc:
        raise ValueError(f"a {SCHEME}:// asset URI names a connection id: {SCHEME}://<connection id>/<topic>")
    if not topic:
        raise ValueError(f"a {SCHEME}:// asset URI names a topic: {SCHEME}://{uri.netloc}/<topic>")
    if uri.query:
        raise ValueError(f"a {SCHEME}:// asset URI has no query: {SCHEME}://{uri.netloc}/{topic}, got ?{uri.query}")
    return uri


def topic_of(asset: object, pyconnect_conn_id: str) -> str | None:
    """The topic an outlet asset names on this connection's backend, or ``None``."""
    uri = getattr(asset, "uri", None)
    prefix = f"{SCHEME}://{pyconnect_conn_id}/"
    if isinstance(uri, str) and uri.startswith(prefix):
        return uri[len(prefix):]
    return None


__all__ = ["SCHEME", "create_asset", "pyconnect_asset", "sanitize_uri", "topic_of"]
