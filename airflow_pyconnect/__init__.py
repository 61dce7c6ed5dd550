"""airflow_pyconnect: the Apache Airflow provider of airflow-pyconnect.

Importing this package is cheap: it holds the version (the one source of it: ``pyproject.toml`` reads it
statically, :func:`~airflow_pyconnect.get_provider_info.get_provider_info` imports it) and the Airflow check.

Airflow is an extra (``pip install 'airflow-pyconnect[airflow]'``), not a requirement: ``connect_runtime`` and
the ``pyconnect`` CLI run without it. So the provider's entry points (the manifest and the plugin) are
installed beside any Airflow, or none, and must never break it: importing this package never raises, and
beside an Airflow older than :data:`MIN_AIRFLOW_VERSION` the entry points register nothing and say why once
(:func:`unsupported_airflow`, :func:`warn_unsupported`). The modules with Airflow classes (hooks, operators,
sensors, triggers, assets, the Spark helper) refuse such an Airflow when imported, naming the version needed
(:func:`require_supported_airflow`). The public classes live in their modules, shaped like an
``apache-airflow-providers-*`` package:

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

import logging

MIN_AIRFLOW_VERSION = "3.3.0"
"""The oldest Airflow this provider runs on (``pyproject.toml``'s ``airflow`` extra says the same)."""

_WARNED: list[str] = []


def unsupported_airflow() -> str | None:
    """Why the provider cannot run beside the Airflow installed here (none, or one older than
    :data:`MIN_AIRFLOW_VERSION`), or ``None`` when it can. Never raises: Airflow's provider discovery calls it."""
    try:
        from airflow import __version__ as found
    except ImportError:
        return "Apache Airflow is not installed (pip install 'airflow-pyconnect[airflow]')"
    try:
        from packaging.version import InvalidVersion, Version
    except ImportError:  # Airflow requires packaging; without it the version cannot be told
        return f"cannot compare Airflow {found} with {MIN_AIRFLOW_VERSION}: the packaging module is missing"
    try:
        too_old = Version(Version(str(found)).base_version) < Version(MIN_AIRFLOW_VERSION)
    except InvalidVersion:
        return f"Apache Airflow's version {found!r} is not a version number; it needs {MIN_AIRFLOW_VERSION}+"
    if too_old:
        return (f"it needs Apache Airflow {MIN_AIRFLOW_VERSION}+, found {found} "
                f"(install Apache Airflow {MIN_AIRFLOW_VERSION} or newer)")
    return None


def warn_unsupported(reason: str) -> None:
    """Log, once per process, that the provider registers nothing here and why (both entry points call it)."""
    if not _WARNED:
        _WARNED.append(reason)
        logging.getLogger(__name__).warning(
            "airflow-pyconnect %s registers nothing (no hooks, operators, connection type, plugin): %s",
            __version__, reason)


def require_supported_airflow() -> None:
    """Raise ``RuntimeError`` naming the Airflow needed, when :func:`unsupported_airflow` gives a reason: the
    modules with Airflow classes call it on import, so a DAG file using them fails with that reason."""
    reason = unsupported_airflow()
    if reason is not None:
        raise RuntimeError(f"The package `airflow-pyconnect:{__version__}` cannot run here: {reason}")


__all__ = ["MIN_AIRFLOW_VERSION", "__version__", "require_supported_airflow", "unsupported_airflow",
           "warn_unsupported"]
