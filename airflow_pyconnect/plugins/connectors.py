"""The ``airflow.plugins`` entry point of the Connectors view: safe to import beside any Airflow.

Airflow 3.3 loads the ``plugins`` of provider manifests only when ``[core] lazy_discover_providers`` is False
(its default is True); then the manifest registers :class:`~airflow_pyconnect.plugins.view.PyConnectPlugin` and
the entry point yields nothing (Airflow skips what is not a plugin), so it is never registered twice. The option
is read from Airflow's config, as Airflow itself reads it (with the same default).

Every Airflow process loads this module (its plugins manager, through the entry point), so it imports no
Airflow class unless the provider can run here: beside an Airflow older than the minimum it yields nothing and
says why once (:func:`airflow_pyconnect.warn_unsupported`), rather than an import error in every process.
"""

from __future__ import annotations

from typing import Any

from airflow_pyconnect import unsupported_airflow, warn_unsupported


def _entry_point_plugin() -> Any:
    """The plugin class for the entry point, or ``None`` (manifest plugins loaded, or an unsupported Airflow)."""
    reason = unsupported_airflow()
    if reason is not None:
        warn_unsupported(reason)
        return None
    from airflow.configuration import conf

    from airflow_pyconnect.plugins.view import PyConnectPlugin

    return PyConnectPlugin if conf.getboolean("core", "lazy_discover_providers", fallback=True) else None


ENTRY_POINT_PLUGIN = _entry_point_plugin()

__all__ = ["ENTRY_POINT_PLUGIN"]
