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
a URI naming no connection, or a topic Kafka would refuse (:func:`check_topic`: Kafka's rule, ``[a-zA-Z0-9._-]``,
1 to 249 characters, not ``.`` nor ``..``), is refused when the DAG is parsed. :func:`create_asset` is its factory,
:func:`convert_asset_to_openlineage` its OpenLineage converter (docs/lineage.md).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from airflow_pyconnect import require_supported_airflow

require_supported_airflow()

from airflow.sdk import Asset  # noqa: E402  (after the Airflow check)

if TYPE_CHECKING:
    from urllib.parse import SplitResult

SCHEME = "pyconnect"

TOPIC_RULE = "1 to 249 characters of [a-zA-Z0-9._-], not '.' nor '..' (Kafka's rule for topic names)"
"""Kafka's legal topic names (``org.apache.kafka.common.internals.Topic.validate``), as errors name it."""

_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def legal_topic(topic: object) -> bool:
    """Whether Kafka accepts ``topic`` as a topic name (:data:`TOPIC_RULE`)."""
    return isinstance(topic, str) and bool(_LEGAL_TOPIC.fullmatch(topic)) and topic not in (".", "..")


def check_topic(topic: str, where: str = "topic") -> str:
    """``topic`` when Kafka accepts it as a topic name; else ``ValueError`` naming ``where`` and the rule."""
    if not legal_topic(topic):
        shown = topic if not isinstance(topic, str) or len(topic) <= 60 else f"{topic[:40]}... ({len(topic)} characters)"
        raise ValueError(f"{where} {shown!r} is not a Kafka topic name: a topic name is {TOPIC_RULE}")
    return topic


def pyconnect_asset(topic: str, pyconnect_conn_id: str = "pyconnect_default") -> Asset:
    """The Asset of ``topic`` on the backend of ``pyconnect_conn_id``."""
    return create_asset(topic=topic, pyconnect_conn_id=pyconnect_conn_id)


def create_asset(*, topic: str, pyconnect_conn_id: str = "pyconnect_default",
                 extra: dict[str, Any] | None = None) -> Asset:
    """The asset factory of the ``pyconnect`` scheme (``asset-uris`` of the provider info); ``ValueError`` for a
    topic Kafka would refuse (:data:`TOPIC_RULE`)."""
    check_topic(topic, f"the topic of a {SCHEME}:// asset")
    uri = f"{SCHEME}://{pyconnect_conn_id}/{topic}"
    return Asset(name=uri, uri=uri, extra=extra)


def sanitize_uri(uri: SplitResult) -> SplitResult:
    """Airflow's URI handler for ``pyconnect://<connection id>/<topic>``: both parts are required, the topic is
    a name Kafka accepts (:data:`TOPIC_RULE`: no ``/``, no space), and the URI has nothing else (no query: a
    topic is named by its path alone)."""
    topic = uri.path[1:] if uri.path.startswith("/") else uri.path
    if not uri.netloc:
        raise ValueError(f"a {SCHEME}:// asset URI names a connection id: {SCHEME}://<connection id>/<topic>")
    if not topic:
        raise ValueError(f"a {SCHEME}:// asset URI names a topic: {SCHEME}://{uri.netloc}/<topic>")
    if uri.query:
        raise ValueError(f"a {SCHEME}:// asset URI has no query: {SCHEME}://{uri.netloc}/{topic}, got ?{uri.query}")
    check_topic(topic, f"the topic of a {SCHEME}://{uri.netloc}/ asset URI")
    return uri


def convert_asset_to_openlineage(asset: Asset, lineage_context: Any = None) -> Any:
    """The scheme's OpenLineage converter (``to_openlineage_converter`` of ``asset-uris``): the topic's dataset on
    the connection's backend, :func:`airflow_pyconnect.lineage.convert_asset_to_openlineage` (imported only here,
    when OpenLineage calls it: Airflow imports this module whenever it reads the scheme's handlers)."""
    from airflow_pyconnect.lineage import convert_asset_to_openlineage as convert

    return convert(asset, lineage_context)


def topic_of(asset: object, pyconnect_conn_id: str) -> str | None:
    """The topic an outlet asset names on this connection's backend, or ``None``."""
    uri = getattr(asset, "uri", None)
    prefix = f"{SCHEME}://{pyconnect_conn_id}/"
    if isinstance(uri, str) and uri.startswith(prefix):
        return uri[len(prefix):]
    return None


__all__ = ["SCHEME", "TOPIC_RULE", "check_topic", "convert_asset_to_openlineage", "create_asset", "legal_topic",
           "pyconnect_asset", "sanitize_uri", "topic_of"]
