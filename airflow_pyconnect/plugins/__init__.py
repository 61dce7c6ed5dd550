"""The Connectors view: an Airflow plugin the provider registers (``plugins`` in the provider manifest).

- :mod:`.connectors`: the ``airflow.plugins`` entry point (nothing beside an Airflow the provider cannot run on);
- :mod:`.view`: the :class:`~airflow_pyconnect.plugins.view.PyConnectPlugin` class
  (``fastapi_apps`` built only when the API server asks, the "Connectors" navigation entry, the
  operator extra link);
- :mod:`.links`: :class:`~airflow_pyconnect.plugins.links.ConnectorsLink`, the only part a DAG file
  loads (through the operators), and it imports nothing but Airflow's ``BaseOperatorLink``;
- :mod:`.app`: the FastAPI app (JSON API, permission checks, the page), API server only;
- :mod:`.service`: what the page shows, over ``connect_runtime.admin``.

This ``__init__`` imports nothing.
"""
