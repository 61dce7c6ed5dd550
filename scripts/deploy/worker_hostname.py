"""Airflow's ``[core] hostname_callable`` for the deployment's Celery workers: the worker's own name.

Two workers on one machine share its hostname; a real deployment's workers each have their own. Tests use it too
(two Airflow processes on one machine told apart, as two machines would be). Each worker of
:func:`deploy.airflow_celery.airflow_celery` runs with ``PYCONNECT_WORKER_HOSTNAME`` set to its name and
``AIRFLOW__CORE__HOSTNAME_CALLABLE=deploy.worker_hostname.hostname``, so the task instances it runs record that
name (the ``hostname`` column, the UI, our Connectors view's Runs), as on two machines.
"""

from __future__ import annotations

import os
import socket

__all__ = ["CALLABLE", "WORKER_HOSTNAME_ENV", "hostname"]

WORKER_HOSTNAME_ENV = "PYCONNECT_WORKER_HOSTNAME"
CALLABLE = "scripts.deploy.worker_hostname.hostname"
"""The callable's path with the repository on ``PYTHONPATH`` (the tests); with ``scripts/`` on it (the deployment's
workers): ``deploy.worker_hostname.hostname``."""


def hostname() -> str:
    """:data:`WORKER_HOSTNAME_ENV`, else the machine's name (``socket.getfqdn()``, Airflow's default)."""
    return os.environ.get(WORKER_HOSTNAME_ENV) or socket.getfqdn()
