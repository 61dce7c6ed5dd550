"""The provider manifest, registered under the ``apache_airflow_provider`` entry point.

Airflow's ``ProvidersManager`` calls :func:`get_provider_info` to learn the hooks, operators,
sensors, triggers and the ``pyconnect`` connection type of this package. It must stay a plain
function returning plain data: it is called when Airflow lists providers, so it imports nothing.
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


def get_provider_info() -> dict[str, Any]:
    """The provider's manifest (the ``provider.yaml`` of an ``apache-airflow-providers-*`` package)."""
    from airflow_pyconnect import __version__

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
                                   "airflow_pyconnect.operators.fanout"],
            }
        ],
        "sensors": [{"integration-name": _INTEGRATION, "python-modules": ["airflow_pyconnect.sensors.offsets"]}],
        "triggers": [
            {"integration-name": _INTEGRATION, "python-modules": ["airflow_pyconnect.triggers.offsets",
                                                                  "airflow_pyconnect.triggers.committed"]}
        ],
        "plugins": [{"name": "pyconnect", "plugin-class": "airflow_pyconnect.plugins.connectors.PyConnectPlugin"}],
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
