"""airflow_pyconnect: the Apache Airflow provider of airflow-pyconnect.

Importing this package is cheap: it holds only the version. The public classes live in their
modules, shaped like an ``apache-airflow-providers-*`` package:

- :class:`airflow_pyconnect.hooks.pyconnect.PyConnectHook` (connection type ``pyconnect``)
- :class:`airflow_pyconnect.operators.source.PyConnectSourceOperator`
- :class:`airflow_pyconnect.operators.sink.PyConnectSinkOperator`
- :class:`airflow_pyconnect.sensors.offsets.PyConnectCommittedOffsetsSensor`
- :class:`airflow_pyconnect.triggers.offsets.CommittedOffsetsTrigger`
- :func:`airflow_pyconnect.assets.pyconnect_asset` (the Asset of a topic)

Nothing in this package imports ``confluent_kafka``, ``pyspark``, a backend or a connector at module
level: DAG files that use the operators parse without them (see ``bench/bench_dag_import.py``).
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
