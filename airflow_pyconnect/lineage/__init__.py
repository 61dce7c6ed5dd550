"""OpenLineage for the pyconnect tasks (docs/lineage.md): what each task read and wrote, named by OpenLineage's
naming spec, with output statistics, schemas and the committed ranges.

- :mod:`~airflow_pyconnect.lineage.datasets`: the datasets of a run, per connector kind (plain data, no OpenLineage);
- :mod:`~airflow_pyconnect.lineage.operator`: the ``OperatorLineage`` of a task's run (imports OpenLineage);
- :mod:`~airflow_pyconnect.lineage.facets`: the custom run facet ``pyconnectRanges`` (imports OpenLineage);
- :func:`operator_lineage`: what the operators' ``get_openlineage_facets_on_complete`` returns;
- :func:`convert_asset_to_openlineage`: the ``pyconnect://`` asset scheme's converter (``asset-uris`` of the
  provider info), so an outlet ``pyconnect://<connection id>/<topic>`` is the topic's dataset.

Everything OpenLineage is imported inside these functions: a DAG file importing the operators imports none of it,
and without ``apache-airflow-providers-openlineage`` (the ``lineage`` extra) nothing calls them (the listener is the
provider's); calling one then raises :class:`~connect_runtime.api.errors.MissingExtraError` naming the extra.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["LINEAGE_EXTRA", "convert_asset_to_openlineage", "known_backend_url", "operator_lineage",
           "require_openlineage"]

LINEAGE_EXTRA = "lineage"


def require_openlineage() -> None:
    """Raise :class:`~connect_runtime.api.errors.MissingExtraError` naming the extra when the OpenLineage provider
    is not installed."""
    try:
        import airflow.providers.openlineage  # noqa: F401
        import openlineage.client  # noqa: F401
    except ImportError as exc:
        from connect_runtime.api.errors import MissingExtraError

        raise MissingExtraError(
            f"OpenLineage lineage needs apache-airflow-providers-openlineage, which is not installed: pip install "
            f"'airflow-pyconnect[{LINEAGE_EXTRA}]'", name=exc.name) from exc


def operator_lineage(kind: str | None, config: Mapping[str, Any], backend_url: str, data: Any,
                     schemas: Mapping[str, Any] | None = None) -> Any:
    """The ``OperatorLineage`` of a pyconnect task: ``kind`` ``source`` or ``sink`` with its rendered ``config``,
    its backend URL, its XCom result ``data`` and the Connect value schemas of its records per topic (``schemas``,
    the run result's ``value_schemas``); an empty one for a task that moves no records (``kind`` ``None``:
    a fan-out's plan and merge tasks; the mapped instances report what they moved) or has no result."""
    require_openlineage()
    from airflow.providers.openlineage.extractors.base import OperatorLineage

    if kind is None or not isinstance(data, Mapping):
        return OperatorLineage()
    from airflow_pyconnect.lineage.operator import extra_for, lineage_of_result

    return lineage_of_result(kind, config, backend_url, data, extra_for(kind, config, data), schemas)


def convert_asset_to_openlineage(asset: Any, lineage_context: Any = None) -> Any:
    """The ``pyconnect`` scheme's converter (``to_openlineage_converter``): the asset
    ``pyconnect://<connection id>/<topic>`` is the topic's dataset on that connection's backend
    (``kafka://{host}:{port}`` or ``pyconnect+sqlite://{path}``, name the topic).

    It never looks a connection up: OpenLineage's listener calls it in a process forked from the task, where a
    lookup through the task's supervisor channel hangs until the listener's timeout (and the START event is lost).
    The backend comes from what a hook of this process already resolved, or from the connection's environment
    variable (``AIRFLOW_CONN_<ID>``); otherwise a ``ValueError`` (Airflow's translation then leaves the asset out).
    The connector tasks never need it: their own datasets come from :func:`operator_lineage`."""
    require_openlineage()
    from urllib.parse import urlsplit

    from openlineage.client.generated.base import Dataset as OpenLineageDataset

    from airflow_pyconnect.lineage.datasets import backend_namespace

    parts = urlsplit(str(asset.uri))
    topic = parts.path.lstrip("/")
    if not parts.netloc or not topic:
        raise ValueError(f"not a pyconnect://<connection id>/<topic> asset URI: {asset.uri!r}")
    return OpenLineageDataset(namespace=backend_namespace(known_backend_url(parts.netloc)), name=topic)


def known_backend_url(conn_id: str) -> str:
    """The backend URL of connection ``conn_id`` without a lookup: resolved before by a hook of this process, or
    from ``AIRFLOW_CONN_<ID>`` (JSON or URI); ``ValueError`` when neither knows it."""
    import os

    from airflow_pyconnect.hooks.pyconnect import RESOLVED_URLS, backend_url_from_host

    if conn_id in RESOLVED_URLS:
        return RESOLVED_URLS[conn_id]
    value = os.environ.get(f"AIRFLOW_CONN_{conn_id.upper()}")
    if not value:
        raise ValueError(f"the backend of connection {conn_id!r} is not known in this process (no lookup here)")
    from airflow.sdk import Connection

    conn = (Connection.from_json(value, conn_id=conn_id) if value.lstrip().startswith("{")
            else Connection.from_uri(value, conn_id=conn_id))
    return backend_url_from_host(conn.host or "", conn.port)
