"""The Airflow plugin of the Connectors view, registered by the provider manifest (``plugins``) or by the
``airflow.plugins`` entry point (:mod:`airflow_pyconnect.plugins.connectors`).

Airflow loads plugins in its scheduler, DAG processor, workers and API server; only the API server
uses ``fastapi_apps``. So the FastAPI app (and with it FastAPI, the admin API and the backends) is
built the first time ``PyConnectPlugin.fastapi_apps`` is read, never when this module is imported.

What the plugin adds:

- ``fastapi_apps``: the JSON API and the page at ``/pyconnect`` (:mod:`airflow_pyconnect.plugins.app`);
- ``external_views``: "Connectors" in the navigation (Browse), showing ``/pyconnect/ui`` in Airflow's UI;
- ``operator_extra_links``: :class:`~airflow_pyconnect.plugins.links.ConnectorsLink`, so the API
  server knows the link the operators declare.
"""

from __future__ import annotations

from typing import Any

from airflow.plugins_manager import AirflowPlugin

from airflow_pyconnect.plugins.links import PAGE_PATH, URL_PREFIX, ConnectorsLink, base_path


class _LazyApps:
    """``fastapi_apps`` built on first read (the API server), cached afterwards."""

    def __init__(self) -> None:
        self._apps: list[dict[str, Any]] | None = None

    def __get__(self, obj: object, owner: type | None = None) -> list[dict[str, Any]]:
        if self._apps is None:
            from airflow_pyconnect.plugins.app import create_app

            self._apps = [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "PyConnect Connectors"}]
        return self._apps


class PyConnectPlugin(AirflowPlugin):
    """The Connectors view: connectors, offsets, lag and runs of every ``pyconnect`` connection."""

    name = "pyconnect"
    fastapi_apps = _LazyApps()
    external_views = [
        {
            "name": "Connectors",
            "href": base_path() + PAGE_PATH,
            "destination": "nav",
            "category": "browse",
            "url_route": "pyconnect_connectors",
        }
    ]
    operator_extra_links = [ConnectorsLink()]


__all__ = ["PyConnectPlugin"]
