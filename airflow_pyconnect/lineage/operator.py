"""A connector task's ``OperatorLineage`` (what ``get_openlineage_facets_on_complete`` returns), from its rendered
config, its backend and what the run committed.

- a **source** task: inputs = the connector's external side (:func:`~airflow_pyconnect.lineage.datasets.external_datasets`),
  outputs = the topics it wrote on its backend;
- a **sink** task: inputs = the topics it read, outputs = the destination per topic.

Outputs carry ``outputStatistics`` (``rowCount``: records this attempt committed, ``size``: their bytes; 0 and 0 for
a rerun that moved nothing) and, where the run knows the columns, ``schema``; the run carries
:class:`~airflow_pyconnect.lineage.facets.PyConnectRangesRunFacet`. Imports OpenLineage, so only the lineage methods
import this module.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_pyconnect.lineage.datasets import Dataset, connector_kind, external_datasets, topic_datasets

__all__ = ["lineage_of_result", "sink_topics", "source_topics"]

log = logging.getLogger(__name__)


def source_topics(config: Mapping[str, Any], data: Mapping[str, Any]) -> list[str]:
    """The topics a source run wrote or its interval holds (a literal ``topic`` of the config too)."""
    topics = set(data.get("interval_ranges") or {}) | set(data.get("ranges") or {})
    topic = config.get("topic")
    if isinstance(topic, str) and topic.strip():
        topics.add(topic.strip())
    return sorted(topics)


def sink_topics(config: Mapping[str, Any], data: Mapping[str, Any]) -> list[str]:
    """The topics a sink run reads: its ``topics`` list, and those it committed or read (``topics.regex``)."""
    listed = config.get("topics")
    names = listed if isinstance(listed, (list, tuple)) else str(listed or "").split(",")
    topics = {str(t).strip() for t in names if str(t).strip()}
    return sorted(topics | set(data.get("committed") or {}) | set(data.get("ranges") or {}))


def _per_topic(data: Mapping[str, Any], topics: Sequence[str]) -> dict[str, tuple[int, int | None]]:
    """``(rows, bytes)`` per topic this attempt committed: the run's own totals when it wrote one topic; else the
    offsets each topic's ranges span (exact on SQLite; on Kafka a span may hold transaction markers) and no size
    (the run counts bytes per run, not per topic)."""
    from connect_runtime import ranges as ranges_mod

    records, size = int(data.get("records") or 0), int(data.get("bytes") or 0)
    ranges = data.get("ranges") or {}
    written = [t for t in topics if ranges.get(t)]
    if len(written) <= 1:
        return {t: ((records, size) if t in written or (not written and len(topics) == 1) else (0, 0)) for t in topics}
    return {t: (ranges_mod.count({t: ranges[t]}) if ranges.get(t) else 0, None) for t in topics}


def _schema_facet(ds: Dataset) -> dict[str, Any]:
    from openlineage.client.generated.schema_dataset import SchemaDatasetFacet, SchemaDatasetFacetFields

    if not ds.fields:
        return {}
    return {"schema": SchemaDatasetFacet(fields=[SchemaDatasetFacetFields(name=n, type=t) for n, t in ds.fields])}


def _input(ds: Dataset) -> Any:
    from openlineage.client.generated.base import InputDataset

    return InputDataset(namespace=ds.namespace, name=ds.name, facets=_schema_facet(ds))


def _output(ds: Dataset, stats: Mapping[str, tuple[int, int | None]]) -> Any:
    from openlineage.client.generated.base import OutputDataset
    from openlineage.client.generated.output_statistics_output_dataset import (
        OutputStatisticsOutputDatasetFacet,
    )

    facets: dict[str, Any] = {}
    if ds.topic is not None and ds.topic in stats:
        rows, size = stats[ds.topic]
        facets["outputStatistics"] = OutputStatisticsOutputDatasetFacet(rowCount=rows, size=size)
    return OutputDataset(namespace=ds.namespace, name=ds.name, facets=_schema_facet(ds), outputFacets=facets)


def lineage_of_result(kind: str, config: Mapping[str, Any], backend_url: str, data: Mapping[str, Any],
                      extra: Mapping[str, Any] | None = None, schemas: Mapping[str, Any] | None = None) -> Any:
    """The ``OperatorLineage`` of a ``source`` or ``sink`` run of ``config`` on ``backend_url`` whose XCom result
    is ``data``; ``extra``: what was learnt after the run (the SqlSink's ``tables``); ``schemas``: per topic, the
    Connect value schema of the run's records (the result's ``value_schemas``)."""
    from airflow.providers.openlineage.extractors.base import OperatorLineage

    from airflow_pyconnect.lineage.facets import FACET_KEY, PyConnectRangesRunFacet

    topics = source_topics(config, data) if kind == "source" else sink_topics(config, data)
    on_backend = topic_datasets(backend_url, topics, schemas)
    outside = external_datasets(config, topics, extra)
    stats = _per_topic(data, topics)
    if kind == "source":
        inputs, outputs = [_input(d) for d in outside], [_output(d, stats) for d in on_backend]
    else:
        inputs, outputs = [_input(d) for d in on_backend], [_output(d, stats) for d in outside]
    facet = PyConnectRangesRunFacet(
        connector=str(data.get("connector") or config.get("name") or ""), kind=kind,
        records=int(data.get("records") or 0), bytes=int(data.get("bytes") or 0), ranges=dict(data.get("ranges") or {}),
        intervalRanges=dict(data.get("interval_ranges") or {}) if kind == "source" else None,
        generation=data.get("generation"))
    return OperatorLineage(inputs=inputs, outputs=outputs, run_facets={FACET_KEY: facet})


def sql_sink_tables(config: Mapping[str, Any], topics: Sequence[str]) -> dict[str, Any]:
    """The SqlSink's tables as its database describes them (``{}`` and a warning when it cannot be asked: the
    lineage then names the tables without columns)."""
    from connect_runtime.connectors.sql import SqlSink

    try:
        return SqlSink().table_columns(config, list(topics))
    except Exception as exc:  # lineage is best effort: the run itself succeeded
        log.warning("OpenLineage: the SqlSink's tables could not be described (%s: %s); reported without columns",
                    type(exc).__name__, exc)
        return {}


def extra_for(kind: str, config: Mapping[str, Any], data: Mapping[str, Any]) -> dict[str, Any]:
    """What the datasets need beyond the config and the result (the SqlSink's table columns)."""
    if kind == "sink" and connector_kind(config) == "SqlSink":
        return {"tables": sql_sink_tables(config, sink_topics(config, data))}
    return {}
