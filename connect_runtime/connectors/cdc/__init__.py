"""Change data capture from PostgreSQL (issue 36): Debezium's events, exactly once, in bounded runs.

The design is docs/cdc.md. Where things are: ``_pgoutput`` (the ``pgoutput`` messages decoded from bytes),
``_types`` (column types as Debezium's Connect schemas and values).
"""

from __future__ import annotations

__all__: list[str] = []
