"""One free TCP port for a server a test starts: :func:`free_port`.

``bind(("127.0.0.1", 0))`` hands out a port from the kernel's ephemeral range
(``/proc/sys/net/ipv4/ip_local_port_range``), the same range every outgoing connection takes its local port from. A
port chosen that way and handed to a server that binds it minutes later (an api-server started after
``airflow dags test`` runs) can meanwhile be the local end of a connection to the broker or to Spark, and the
server fails with "address already in use". So ports come from below that range, are checked free on
``0.0.0.0`` (servers that bind every interface) and on ``127.0.0.1``, and none is handed out twice in one process.
"""

from __future__ import annotations

import random
import socket
import threading

_LOW, _HIGH = 20000, 32000
_given: set[int] = set()
_lock = threading.Lock()


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):  # not Linux: the IANA range starts at 49152
        return 49152


def _bindable(port: int) -> bool:
    for host in ("0.0.0.0", "127.0.0.1"):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, port))
            except OSError:
                return False
    return True


def free_port() -> int:
    """A TCP port free on every interface, outside the ephemeral range, not handed out before in this process."""
    high = min(_HIGH, _ephemeral_low() - 1)
    with _lock:
        for _ in range(500):
            port = random.randint(_LOW, high)
            if port not in _given and _bindable(port):
                _given.add(port)
                return port
    raise RuntimeError(f"no free TCP port in {_LOW}..{high} after 500 tries (ports handed out: {len(_given)})")
