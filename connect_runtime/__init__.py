"""connect_runtime: a pure-Python connector runtime with Kafka Connect's offset semantics.

Connector authors import from here (the ``connect_runtime.api`` names); ``run_source`` /
``run_sink`` run one bounded connector run. The runtime entry points load lazily, so importing
this package stays cheap (it is imported where Airflow parses DAG files).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from connect_runtime.api import *  # noqa: F403
from connect_runtime.api import __all__ as _api_all

__version__ = "0.1.0"

_LAZY = {
    "run_source": "connect_runtime.runtime.source",
    "plan_source": "connect_runtime.runtime.source",
    "run_source_task": "connect_runtime.runtime.source",
    "SourceRunResult": "connect_runtime.runtime.source",
    "run_sink": "connect_runtime.runtime.sink",
    "SinkRunResult": "connect_runtime.runtime.sink",
    "plan_sink": "connect_runtime.runtime.sink",
    "run_sink_task": "connect_runtime.runtime.sink",
    "open_backend": "connect_runtime.backends",
}

if TYPE_CHECKING:
    from connect_runtime.backends import open_backend
    from connect_runtime.runtime.sink import SinkRunResult, plan_sink, run_sink, run_sink_task
    from connect_runtime.runtime.source import SourceRunResult, plan_source, run_source, run_source_task


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'connect_runtime' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [*_api_all, "SinkRunResult", "SourceRunResult", "open_backend", "plan_sink", "plan_source", "run_sink",
           "run_sink_task", "run_source", "run_source_task"]
