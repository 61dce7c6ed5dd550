"""Airflow's ``[core] hostname_callable`` for the deployment's Celery workers: the worker's own name.

Two workers on one machine share its hostname; a real deployment's workers each have their own. Each worker of
:func:`deploy.airflow_celery.airflow_celery` runs with ``PYCONNECT_WORKER_HOSTNAME`` set to its name and
``AIRFLOW__CORE__HOSTNAME_CALLABLE=deploy.worker_hostname.hostname``, so the task instances it runs record that
name (the ``hostname`` column, the UI, our Connectors view's Runs), as on two machines.
"""

from __future__ import annotations

import os
import socket

__all__ = ["hostname"]


def hostname() -> str:
    """``PYCONNECT_WORKER_HOSTNAME``, else the machine's name."""
    return os.environ.get("PYCONNECT_WORKER_HOSTNAME") or socket.getfqdn()
