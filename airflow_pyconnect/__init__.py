"""airflow_pyconnect: the Apache Airflow provider of airflow-pyconnect.

Importing this package is cheap: it holds the version (the one source of it: ``pyproject.toml`` reads it
statically, :func:`~airflow_pyconnect.get_provider_info.get_provider_info` imports it) and, as every
official provider's ``__init__`` does, refuses an Airflow older than :data:`MIN_AIRFLOW_VERSION`. The public
classes live in their modules, shaped like an ``apache-airflow-providers-*`` package:

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

# set before the imports: Airflow may be the one importing this package (its providers manager loading
# get_provider_info while ``import airflow`` runs), and get_provider_info reads the version from here
__version__ = "0.1.0"

import packaging.version
from airflow import __version__ as airflow_version

MIN_AIRFLOW_VERSION = "3.3.0"
"""The oldest Airflow this provider runs on (``pyproject.toml``'s ``airflow`` extra says the same)."""

if packaging.version.parse(packaging.version.parse(airflow_version).base_version) < packaging.version.parse(
    MIN_AIRFLOW_VERSION
):
    raise RuntimeError(
        f"The package `airflow-pyconnect:{__version__}` needs Apache Airflow {MIN_AIRFLOW_VERSION}+, "
        f"found {airflow_version}"
    )

__all__ = ["MIN_AIRFLOW_VERSION", "__version__"]
