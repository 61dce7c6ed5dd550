"""The first code of README.md and docs/running.md: a bounded source run, then a sink run up to exactly what it
committed, on the embedded backend under ``./var``. ``tests/integration/test_docs.py`` runs it in a temporary
directory."""

from __future__ import annotations

# [START quickstart]
from connect_runtime import run_sink, run_source

result = run_source(
    {"name": "gen", "connector.class": "connect_runtime.connectors.datagen.DataGenSource",
     "topic": "events", "max.records": "1000"},
    backend="sqlite:///var/pyconnect.db",
)
print(result.to_dict())   # {"connector": "gen", "records": 1000, "ranges": {"events": {"0": [0, 1000]}}, ...}

run_sink(
    {"name": "archive", "connector.class": "connect_runtime.connectors.files.FileSink",
     "topics": "events", "directory": "var/archive"},
    backend="sqlite:///var/pyconnect.db",
    until_offsets=result.to_dict(),          # consume exactly up to what the source committed
)
# [END quickstart]
