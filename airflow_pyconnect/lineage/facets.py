"""The custom OpenLineage facet of a pyconnect task: :class:`PyConnectRangesRunFacet` (run facet ``pyconnectRanges``).

Imported only by the lineage methods (it imports ``openlineage.client``, which comes with
``apache-airflow-providers-openlineage``: the ``lineage`` extra). Its JSON schema ships beside this module
(``PyConnectRangesRunFacet.json``) and is what ``_schemaURL`` points to; docs/lineage.md shows an example.
"""

from __future__ import annotations

from typing import Any

import attr
from openlineage.client.generated.base import RunFacet

__all__ = ["FACET_KEY", "SCHEMA_URL", "PyConnectRangesRunFacet"]

FACET_KEY = "pyconnectRanges"
"""The facet's key in ``run.facets``."""

SCHEMA_URL = ("https://raw.githubusercontent.com/airflow-pyconnect/airflow-pyconnect/main/airflow_pyconnect/lineage/"
              "PyConnectRangesRunFacet.json#/$defs/PyConnectRangesRunFacet")


@attr.define
class PyConnectRangesRunFacet(RunFacet):
    """What a connector task committed, in the terms of the runtime (docs/xcom.md): the connector, whether it ran
    as a ``source`` or a ``sink``, the generation of the run (sources), the records and bytes this attempt committed,
    the committed ``ranges`` of this attempt (``{topic: {"<partition>": [from, to]}}``, the exact spans a reader
    reads; ``{}`` for an attempt that moved nothing) and, for a source, ``intervalRanges``: everything the data
    interval holds so far, the same on every attempt of the interval (what a rerun's downstream reads)."""

    connector: str
    kind: str
    records: int
    bytes: int
    ranges: dict[str, Any]
    intervalRanges: dict[str, Any] | None = attr.field(default=None)
    generation: int | None = attr.field(default=None)

    @staticmethod
    def _get_schema() -> str:
        return SCHEMA_URL
