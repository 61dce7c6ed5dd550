"""The backend's URL and settings: ``sqlite:///path`` parsed, each setting checked, every bad one named.

What each setting means is in the package docstring (:mod:`connect_runtime.backends.sqlite`); settings
other backends use are ignored with a warning, so one connection's extras may carry both.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from connect_runtime.api.errors import ConfigError

log = logging.getLogger(__name__)

DEFAULT_BUSY_TIMEOUT_MS = 30_000
_SYNCHRONOUS = ("NORMAL", "FULL", "EXTRA")
_SETTINGS = ("busy.timeout.ms", "synchronous", "default.partitions", "cluster.id")


def parse_url(url: str) -> Path:
    """The database path of a ``sqlite:///path`` URL (ConfigError naming ``backend`` otherwise)."""
    expected = "expected sqlite:///path/to/file.db (sqlite:////absolute/path.db or sqlite:///relative.db)"
    if not url.lower().startswith("sqlite://"):
        raise ConfigError(errors={"backend": f"{expected}, got {url!r}"})
    rest = url[len("sqlite://"):]
    if not rest.startswith("/"):
        raise ConfigError(errors={"backend": f"{expected}; {url!r} names a host, the SQLite backend has none"})
    path = rest[1:]
    if not path:
        raise ConfigError(errors={"backend": f"{expected}; {url!r} has no file path"})
    if path == ":memory:" or path.startswith("file::memory:") or "mode=memory" in path:
        raise ConfigError(
            errors={"backend": f"{url!r} is an in-memory database; processes must share the backend, "
                               "so give a file path: sqlite:///path/to/file.db"}
        )
    return Path(path)


def _parse_settings(path: Path, settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """The keyword arguments of :class:`SQLiteBackend` for ``settings`` (one :class:`ConfigError` naming
    every bad setting); settings this backend does not use are logged and ignored."""
    settings = dict(settings or {})
    errors: dict[str, str] = {}
    busy = _int_setting(settings, "busy.timeout.ms", DEFAULT_BUSY_TIMEOUT_MS, 0, errors)
    partitions = _int_setting(settings, "default.partitions", 1, 1, errors)
    sync = str(settings.get("synchronous", "NORMAL")).upper()
    if sync not in _SYNCHRONOUS:
        errors["synchronous"] = f"expected one of {', '.join(_SYNCHRONOUS)}, got {settings.get('synchronous')!r}"
    cluster = settings.get("cluster.id")
    if cluster is not None and (not isinstance(cluster, str) or not cluster):
        errors["cluster.id"] = f"expected a non-empty string, got {cluster!r}"
    if errors:
        raise ConfigError(errors=errors)
    unknown = sorted(str(k) for k in settings if k not in _SETTINGS)
    if unknown:
        log.warning("SQLite backend %s: ignoring settings it does not use: %s (it uses %s)",
                    path, ", ".join(unknown), ", ".join(_SETTINGS))
    return {"busy_timeout_ms": busy, "synchronous": sync, "default_partitions": partitions, "cluster_id": cluster}


def _int_setting(settings: Mapping[str, Any], name: str, default: int, minimum: int,
                 errors: dict[str, str]) -> int:
    raw = settings.get(name, default)
    try:
        if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
            raise ValueError
        value = int(raw)
    except (TypeError, ValueError):
        errors[name] = f"expected an integer >= {minimum}, got {raw!r}"
        return default
    if value < minimum:
        errors[name] = f"expected an integer >= {minimum}, got {raw!r}"
        return default
    return value
