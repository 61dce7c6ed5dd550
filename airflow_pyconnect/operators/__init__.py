"""Part of the airflow_pyconnect provider (see the package docstring); refuses, on import, an Airflow the
provider cannot run on, naming the version it needs."""

from airflow_pyconnect import require_supported_airflow

require_supported_airflow()
