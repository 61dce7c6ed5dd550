"""The one error tree of the connector runtime.

::

    ConnectError                    root: anything the runtime or a connector raises on purpose
    ├── ConfigError                 a config is invalid; ``.errors`` maps each bad field to what was expected
    ├── DataError                   a record cannot be converted, transformed or written as it is
    ├── RetriableError              a transient failure; the same operation may succeed if retried
    ├── ProducerFencedError         a newer instance of the same task started; this one must stop
    ├── ConnectorRunningError       refused while a run holds the connector (KIP-875 offset changes)
    ├── BackendError                the record/offset store failed (sqlite3 / confluent_kafka errors, chained)
    │   ├── BackendUnavailableError the store could not be reached within its bounded wait
    │   └── AuthorizationError      the store refused an operation for want of a permission (a Kafka ACL); never
    │                               retried; names the operation, the resource, the principal and the fix
    ├── WaitTimeoutError            a bounded wait ran out; the message says what was waited for
    └── MissingExtraError           an optional dependency is not installed (also an ``ImportError``); the
                                    message names the extra to install: ``pip install 'airflow-pyconnect[kafka]'``

Backends translate ``sqlite3`` and ``confluent_kafka`` exceptions into these at their edge and chain
the original (``raise BackendError(...) from exc``). The Airflow provider turns them into Airflow
exceptions with the same message.
"""

from __future__ import annotations

from collections.abc import Mapping


class ConnectError(Exception):
    """Root of every error the connector runtime raises on purpose."""


class ConfigError(ConnectError):
    """A connector, task or runtime config is invalid.

    ``errors`` maps each invalid field name to a message saying what was expected, so a single error
    reports every bad field at once.
    """

    def __init__(self, message: str | None = None, errors: Mapping[str, str] | None = None) -> None:
        self.errors: dict[str, str] = dict(errors or {})
        if message is None:
            message = "invalid configuration: " + "; ".join(
                f"{name}: {why}" for name, why in self.errors.items()
            )
        super().__init__(message)


class DataError(ConnectError):
    """A record's key, value or headers cannot be converted, transformed or written."""


class RetriableError(ConnectError):
    """A transient failure: the runtime may retry the same operation (e.g. redeliver a ``put``)."""


class ProducerFencedError(ConnectError):
    """A newer instance of the same task initialised its producer; this instance may not commit."""


class ConnectorRunningError(ConnectError):
    """Refused because a run holds the connector (altering or resetting offsets, KIP-875)."""


class BackendError(ConnectError):
    """The record and offset store failed; the underlying exception is chained as ``__cause__``."""


class BackendUnavailableError(BackendError):
    """The store could not be reached within its bounded wait (the message names where and how long)."""


class AuthorizationError(BackendError):
    """The store refused an operation for want of a permission (a Kafka ACL). Never retried (a permission does not
    come back by waiting): the run fails at once and commits nothing more; what it committed stays.

    ``operation`` (Kafka's name: ``Write``, ``Read``, ``DescribeConfigs``, ...), ``resource_type`` (``Topic``,
    ``Group``, ``TransactionalId``, ``Cluster``), ``resource_name`` and ``pattern_type`` (``literal`` or
    ``prefixed``) say what to grant, ``principal`` to whom (``None`` when the client cannot tell), ``command`` the
    ``kafka-acls.sh`` command that grants it."""

    def __init__(self, message: str, *, operation: str, resource_type: str, resource_name: str,
                 pattern_type: str = "literal", principal: str | None = None, command: str = "") -> None:
        super().__init__(message)
        self.operation = operation
        self.resource_type = resource_type
        self.resource_name = resource_name
        self.pattern_type = pattern_type
        self.principal = principal
        self.command = command


class WaitTimeoutError(ConnectError):
    """A bounded wait ran out; the message says what was waited for and for how long."""


EXTRAS: dict[str, str] = {
    "confluent_kafka": "kafka", "fastavro": "kafka", "jsonschema": "kafka", "google": "kafka",
    "pyarrow": "lake", "fsspec": "lake", "s3fs": "lake",
    "sqlalchemy": "sql", "psycopg": "sql",
    "pyspark": "spark",
}
"""The extra of ``pyproject.toml`` that installs each optional top-level package the runtime imports lazily."""


class MissingExtraError(ConnectError, ImportError):
    """An optional dependency is not installed; the message names the extra that installs it."""


def missing_extra(exc: ImportError, what: str) -> ImportError:
    """``exc`` as a :class:`MissingExtraError` naming the extra to install when the missing module belongs to one
    (see :data:`EXTRAS`), else ``exc`` itself. ``what`` names what needed it (``"the Kafka backend"``)."""
    top = (exc.name or "").split(".")[0]
    extra = EXTRAS.get(top)
    if extra is None or isinstance(exc, MissingExtraError):
        return exc
    return MissingExtraError(f"{what} needs {top}, which is not installed: pip install 'airflow-pyconnect[{extra}]'",
                             name=exc.name)


__all__ = [
    "EXTRAS",
    "AuthorizationError",
    "BackendError",
    "BackendUnavailableError",
    "ConfigError",
    "ConnectError",
    "ConnectorRunningError",
    "DataError",
    "MissingExtraError",
    "ProducerFencedError",
    "RetriableError",
    "WaitTimeoutError",
    "missing_extra",
]
