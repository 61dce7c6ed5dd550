"""Part of the airflow_pyconnect provider (see the package docstring)."""
