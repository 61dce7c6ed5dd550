"""The provider manifest, registered under the ``apache_airflow_provider`` entry point.

Airflow's ``ProvidersManager`` calls :func:`get_provider_info` to learn everything this package registers:
the hooks, operators, sensors, triggers, the ``pyconnect`` connection type and its form, the Connectors
plugin and extra link, the ``pyconnect://`` asset URI scheme and the ``[pyconnect]`` config section (so
``airflow config get-value pyconnect ...`` and ``airflow providers configs`` know its options). It must stay
a plain function returning plain data: it is called when Airflow lists providers, so it imports nothing but
the version.

Beside an Airflow the provider cannot run on (older than ``MIN_AIRFLOW_VERSION``), it returns a manifest that
registers nothing (name, version, and the reason in its description) and logs the reason once: it never
raises inside Airflow's provider discovery, which would break ``import airflow`` and every ``airflow`` command.
"""

from __future__ import annotations

from typing import Any

_INTEGRATION = "PyConnect"

UI_FIELD_BEHAVIOUR: dict[str, Any] = {
    "hidden_fields": ["schema"],
    "relabeling": {
        "host": "Backend URL or Kafka bootstrap servers",
        "port": "Port (Kafka, with a single bare host)",
        "login": "SASL username",
        "password": "SASL password",
        "extra": "Client settings (JSON)",
    },
    "placeholders": {
        "host": "sqlite:////var/pyconnect/pyconnect.db  or  kafka://broker1:9092,broker2:9092",
        "port": "9092",
        "login": "SASL username (Kafka only)",
        "password": "SASL password (Kafka only)",
        "extra": '{"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}',
    },
}
"""The ``pyconnect`` connection form (``PyConnectHook.get_ui_field_behaviour()`` returns a copy)."""


CONFIG: dict[str, Any] = {
    "pyconnect": {
        "description": "The PyConnect provider (airflow_pyconnect): where its tasks keep records and offsets.",
        "options": {
            "allow_embedded_default": {
                "description": "When the connection pyconnect_default is not defined, the hook falls back to the "
                "embedded SQLite file $AIRFLOW_HOME/pyconnect/pyconnect.db only where every task shares it: a "
                "single-machine executor (LocalExecutor), as [core] executor names it. Under any other executor (Celery, "
                "Kubernetes, Edge) a missing pyconnect_default is an error naming the connection to create. "
                "Set this to True to use the embedded file anyway (e.g. every worker on one machine sharing "
                "AIRFLOW_HOME).\n",
                "version_added": "0.1.0",
                "type": "boolean",
                "example": "True",
                "default": "False",
            },
            "workers_share_disk": {
                "description": "Under an executor that may run tasks on several machines (Celery, Kubernetes, "
                "Edge), a connector task whose store or paths are on this worker's own disk (the embedded SQLite "
                "store, a FileSink directory, a DirectorySource folder, a local ParquetSink path, a SQLite database "
                "of the SQL connectors) fails before moving any record, naming each path and the fix "
                "(docs/deploying.md). Set this to True when every worker sees the same files (all workers on one "
                "machine).\n",
                "version_added": "0.1.0",
                "type": "boolean",
                "example": "True",
                "default": "False",
            },
        },
    },
}
"""The ``[pyconnect]`` config section (``config`` of the provider info): every ``conf.get*("pyconnect", ...)``
of the provider, with its default, so Airflow's config parser and CLI know it."""


def get_provider_info() -> dict[str, Any]:
    """The provider's manifest (the ``provider.yaml`` of an ``apache-airflow-providers-*`` package); one that
    registers nothing, saying why, beside an Airflow the provider cannot run on."""
    from airflow_pyconnect import __version__, unsupported_airflow, warn_unsupported

    reason = unsupported_airflow()
    if reason is not None:
        warn_unsupported(reason)
        return {"package-name": "airflow-pyconnect", "name": "PyConnect", "versions": [__version__],
                "description": f"Registers nothing here: {reason}."}
    return {
        "package-name": "airflow-pyconnect",
        "name": "PyConnect",
        "description": "Kafka Connect's offset semantics for Airflow: bounded exactly-once connector runs "
        "(source and sink operators), a committed-offsets sensor and trigger, an AssetWatcher trigger for "
        "newly committed records, on an embedded SQLite "
        "backend or Kafka.",
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": _INTEGRATION,
                "external-doc-url": "https://kafka.apache.org/documentation/#connect",
                "tags": ["software"],
            }
        ],
        "hooks": [{"integration-name": _INTEGRATION, "python-modules": ["airflow_pyconnect.hooks.pyconnect"]}],
        "operators": [
            {
                "integration-name": _INTEGRATION,
                "python-modules": ["airflow_pyconnect.operators.source", "airflow_pyconnect.operators.sink",
                                   "airflow_pyconnect.operators.fanout", "airflow_pyconnect.operators.fanout_sink",
                                   "airflow_pyconnect.operators.spark_submit"],
            }
        ],
        "sensors": [{"integration-name": _INTEGRATION, "python-modules": ["airflow_pyconnect.sensors.offsets"]}],
        "triggers": [
            {"integration-name": _INTEGRATION, "python-modules": ["airflow_pyconnect.triggers.offsets",
                                                                  "airflow_pyconnect.triggers.committed"]}
        ],
        "extra-links": ["airflow_pyconnect.plugins.links.ConnectorsLink"],
        "asset-uris": [
            {
                "schemes": ["pyconnect"],
                "handler": "airflow_pyconnect.assets.sanitize_uri",
                "factory": "airflow_pyconnect.assets.create_asset",
                "to_openlineage_converter": "airflow_pyconnect.assets.convert_asset_to_openlineage",
            }
        ],
        "config": CONFIG,
        "plugins": [{"name": "pyconnect", "plugin-class": "airflow_pyconnect.plugins.view.PyConnectPlugin"}],
        "connection-types": [
            {
                "hook-class-name": "airflow_pyconnect.hooks.pyconnect.PyConnectHook",
                "hook-name": "PyConnect",
                "connection-type": "pyconnect",
                "ui-field-behaviour": {k.replace("_", "-"): v for k, v in UI_FIELD_BEHAVIOUR.items()},
                "conn-fields": {
                    "security_protocol": {
                        "label": "Security protocol (Kafka)",
                        "description": "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (librdkafka security.protocol)",
                        "schema": {"type": ["string", "null"]},
                    },
                    "sasl_mechanism": {
                        "label": "SASL mechanism (Kafka)",
                        "description": "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER (librdkafka sasl.mechanism)",
                        "schema": {"type": ["string", "null"]},
                    },
                },
            }
        ],
    }
