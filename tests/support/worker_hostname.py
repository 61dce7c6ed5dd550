"""A ``[core] hostname_callable`` for tests: the worker's name as Airflow should know it.

``AIRFLOW__CORE__HOSTNAME_CALLABLE=tests.support.worker_hostname.hostname`` makes Airflow name the worker
``PYCONNECT_TEST_WORKER_HOSTNAME`` (unset: ``socket.getfqdn()``, Airflow's default), so a test can tell two
Airflow processes on one machine apart, as two machines would be, and check that what the Connectors view
shows is Airflow's name for the worker, not the machine's ``socket.gethostname()``.
"""

from __future__ import annotations

import os
import socket

WORKER_HOSTNAME_ENV = "PYCONNECT_TEST_WORKER_HOSTNAME"
CALLABLE = "tests.support.worker_hostname.hostname"


def hostname() -> str:
    """The worker's name: :data:`WORKER_HOSTNAME_ENV`, else ``socket.getfqdn()``."""
    return os.environ.get(WORKER_HOSTNAME_ENV) or socket.getfqdn()


__all__ = ["CALLABLE", "WORKER_HOSTNAME_ENV", "hostname"]
