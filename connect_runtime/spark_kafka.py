"""Spark's own Kafka source over committed ranges: its read options and where its jars are.

On the Kafka backend a committed range is read natively by Spark's Kafka source
(``org.apache.spark:spark-sql-kafka-0-10``), not through the Python data source: no row crosses Python.
This module is pure (no pyspark, no Kafka client, no I/O but listing the jar cache), so the provider can
call it at DAG parse time and the unit tests without Spark; :func:`connect_runtime.spark.read_kafka_range`
runs the read.

The rules that make the read exact:

- ``startingOffsets`` / ``endingOffsets`` per partition are one span ``[from, to)`` of the ranges (ending is
  exclusive in Spark as in :mod:`connect_runtime.ranges`), and ``assign`` names exactly those partitions (not
  ``subscribe``, which would need offsets for every partition of the topic).
- ``kafka.isolation.level=read_committed``: a span may hold transaction markers and records of another
  writer's aborted transaction; Spark's consumer skips them (it tells such gaps from lost data by the
  consumer's position after each poll), so the read returns exactly the committed records.
- ``failOnDataLoss=true`` by default: a span whose records retention already deleted fails the read
  instead of silently returning less.
- A partition with several spans (another writer committed between them) cannot be one Kafka read:
  :func:`kafka_read_options` returns one option set per round of spans, which ``read_kafka_range`` unions.
- ``kafka.group.id`` defaults to ``pyconnect-spark-<hash of the kafka.* options>``: Spark keys its executors'
  pool of Kafka consumers by group id (and refuses one group id with other consumer settings), and makes a
  fresh group id per query by default, so every query would connect new consumers. The read never joins the
  group (``assign``) nor commits to it; set ``kafka.group.id`` (or ``groupIdPrefix``) where ACLs decide
  which groups a client may use.

Secrets: on a secured backend the job needs the connection's credentials, which must not pass through anything
Airflow renders, stores or logs. ``PyConnectSparkSubmitOperator`` resolves them in the worker at run time
(:func:`handoff_settings`) and hands them to the ``spark-submit`` process, so to the driver in client deploy mode,
in the environment variable :data:`SETTINGS_ENV`; the job reads them with :func:`handed_settings`.

Jars: ``scripts/fetch_spark_kafka.sh`` fetches the Kafka source and Spark's Avro functions (``spark-avro``, for
``from_avro``) matching the installed pyspark with Maven into ``$PYCONNECT_SPARK_KAFKA_HOME`` (default
``~/.cache/airflow-pyconnect/spark-kafka-<pyspark version>``), ``jars/`` in it, keeping only what pyspark does not
ship itself (the source, its token provider, ``kafka-clients``, ``commons-pool2``, ``spark-avro``).
:func:`kafka_jars` lists them for ``spark.jars`` / ``--jars``.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from connect_runtime import ranges as ranges_mod

HOME_ENV = "PYCONNECT_SPARK_KAFKA_HOME"
FETCH_COMMAND = "bash scripts/fetch_spark_kafka.sh"
SOURCE_ARTIFACT = "spark-sql-kafka-0-10"
AVRO_ARTIFACT = "spark-avro"
"""Spark's Avro functions (``from_avro``), fetched with the Kafka source."""
EARLIEST = -2
"""Spark's per-partition ``startingOffsets`` value for the earliest offset."""


def _pyspark_jars_dir() -> Path:
    spec = importlib.util.find_spec("pyspark")  # locates the package without importing it (cheap)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError("pyspark is not installed: Spark's Kafka source is matched to its version")
    return Path(spec.origin).parent / "jars"


def pyspark_versions() -> tuple[str, str, Path]:
    """``(spark version, Scala binary version, pyspark's jars directory)`` of the installed pyspark, which the
    fetched Kafka source must match (``4.2.0``, ``2.13``)."""
    version = importlib.metadata.version("pyspark")
    jars = _pyspark_jars_dir()
    cores = sorted(jars.glob("spark-core_*.jar"))
    if not cores:
        raise FileNotFoundError(f"no spark-core_<scala>-*.jar in {jars}: is pyspark installed completely?")
    scala = cores[0].name[len("spark-core_"):].split("-", 1)[0]
    return version, scala, jars


def spark_kafka_home() -> Path:
    """Where ``scripts/fetch_spark_kafka.sh`` puts the jars (in ``jars/``): ``$PYCONNECT_SPARK_KAFKA_HOME`` or
    ``~/.cache/airflow-pyconnect/spark-kafka-<pyspark version>``."""
    configured = os.environ.get(HOME_ENV, "").strip()
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".cache" / "airflow-pyconnect" / f"spark-kafka-{importlib.metadata.version('pyspark')}"


def kafka_jars(home: Path | str | None = None, *, avro: bool = False) -> list[str]:
    """Absolute paths of the jars Spark's Kafka source (and Spark's Avro functions, fetched with it) need beyond
    pyspark's own (for ``spark.jars``, comma-joined, or ``spark-submit --jars``).

    :param avro: also require ``spark-avro`` (``from_avro``: :func:`connect_runtime.spark.read_kafka_avro`).
    :raises FileNotFoundError: naming the fetch command, when they were not fetched.
    """
    jars_dir = (Path(home).expanduser() if home is not None else spark_kafka_home()) / "jars"
    jars = sorted(str(p.resolve()) for p in jars_dir.glob("*.jar")) if jars_dir.is_dir() else []
    needed = {SOURCE_ARTIFACT: "Spark's Kafka source"}
    if avro:
        needed[AVRO_ARTIFACT] = "Spark's Avro functions"
    for artifact, what in needed.items():
        if not any(Path(j).name.startswith(artifact + "_") for j in jars):
            raise FileNotFoundError(f"the jar of {what} ({artifact}) is not in {jars_dir}: fetch it with `{FETCH_COMMAND}` "
                                    f"(set {HOME_ENV} to use another place)")
    return jars


def bootstrap_servers(backend: str) -> str:
    """``host:port[,host:port]`` from a ``kafka://`` backend URL (the backend's own parser) or as given."""
    if "://" not in backend:
        return backend
    from connect_runtime.backends import kafka_bootstrap_servers  # the one parser of kafka:// URLs, no client

    return kafka_bootstrap_servers(backend)


def _read_spans(value: Any) -> ranges_mod.SpanMap:
    """The spans to read: committed ranges (any shape :func:`connect_runtime.ranges.parse` takes), or an
    offset target (``{topic: {partition: next offset}}``, a sink run's result), read from the earliest offset."""
    data = ranges_mod.structured(value, "ranges")
    try:
        return ranges_mod.parse(data)
    except ranges_mod.RangesFormatError:
        targets = ranges_mod.offset_targets(data, "ranges")
    spans: ranges_mod.SpanMap = {}
    for tp, end in targets.items():
        spans.setdefault(tp.topic, {})[tp.partition] = [(EARLIEST, end)]
    return spans


_LOGIN_MODULES = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
                  "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
                  "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule"}
_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_SECURITY_PREFIXES = ("security.", "sasl.", "ssl.", "oauth", "enable.sasl.", "enable.ssl.")
_USED = {"security.protocol", "sasl.mechanism", "sasl.mechanisms", "sasl.username", "sasl.password",
         "ssl.ca.location", "ssl.ca.pem", "ssl.certificate.location", "ssl.certificate.pem", "ssl.key.location",
         "ssl.key.pem", "ssl.key.password", "ssl.endpoint.identification.algorithm"}


class SecuritySettingsError(ValueError):
    """A backend security setting that Spark's Kafka source cannot be given: names the setting, never its value."""


def _jaas_quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _pem(settings: Mapping[str, Any], inline: str, location: str) -> str | None:
    """The PEM text of ``inline`` or of the file ``location`` names (read here: the Java client takes a
    certificate chain and key as one PEM keystore, given inline)."""
    if settings.get(inline):
        return str(settings[inline])
    if settings.get(location):
        return Path(str(settings[location])).expanduser().read_text()
    return None


def kafka_security_options(settings: Mapping[str, Any] | None) -> dict[str, str]:
    """Spark Kafka source options (Java client properties prefixed ``kafka.``) for the backend's librdkafka
    security settings (the ``pyconnect`` connection's client settings): ``security.protocol``,
    ``sasl.mechanism`` (PLAIN, SCRAM-SHA-256/512) with ``sasl.username``/``sasl.password`` (as
    ``kafka.sasl.jaas.config``, which holds the password: Spark's plan of the read does not show the source's
    options, the Java client logs it as ``[hidden]``; keep these options out of rendered templates and logs), the CA as a PEM truststore (``ssl.ca.location`` or
    ``ssl.ca.pem``), a client certificate for mTLS as a PEM keystore (``ssl.certificate.*`` with ``ssl.key.*``,
    the key PKCS#8 as the Java client requires; ``ssl.key.password``) and
    ``ssl.endpoint.identification.algorithm=none``. Other (non-security) client settings are not translated.

    :raises SecuritySettingsError: naming the setting (never its value) and what to pass instead, for a security
        setting the Java client cannot be given this way (OAUTHBEARER, ``oauth_cb``, Kerberos, keystores, ...).
    """
    settings = {str(k): v for k, v in (settings or {}).items() if v is not None and v != ""}
    for key in sorted(settings):
        if key.startswith(_SECURITY_PREFIXES) and key not in _USED:
            raise SecuritySettingsError(
                f"the backend setting {key!r} has no translation to Spark's Kafka source options: pass the Java "
                "client property yourself as a read option ('kafka.<property>', e.g. kafka.sasl.jaas.config and "
                "kafka.sasl.login.callback.handler.class for OAUTHBEARER) and leave it out of the settings given")
    out: dict[str, str] = {}
    protocol = str(settings.get("security.protocol", "PLAINTEXT")).upper()
    if protocol not in _PROTOCOLS:
        raise SecuritySettingsError(f"security.protocol must be one of {', '.join(_PROTOCOLS)}, got {protocol!r}")
    if protocol != "PLAINTEXT":
        out["kafka.security.protocol"] = protocol
    mechanism = settings.get("sasl.mechanism", settings.get("sasl.mechanisms"))
    if protocol.startswith("SASL_"):
        mechanism = str(mechanism or "GSSAPI").upper()
        if mechanism not in _LOGIN_MODULES:
            raise SecuritySettingsError(
                f"sasl.mechanism {mechanism} has no translation to Spark's Kafka source options (only "
                f"{', '.join(_LOGIN_MODULES)}): pass kafka.sasl.mechanism, kafka.sasl.jaas.config (and its callback "
                "handler) yourself as read options")
        for key in ("sasl.username", "sasl.password"):
            if key not in settings:
                raise SecuritySettingsError(f"sasl.mechanism {mechanism} needs {key} in the backend settings")
        out["kafka.sasl.mechanism"] = mechanism
        out["kafka.sasl.jaas.config"] = (f"{_LOGIN_MODULES[mechanism]} required "
                                         f"username={_jaas_quoted(str(settings['sasl.username']))} "
                                         f"password={_jaas_quoted(str(settings['sasl.password']))};")
    if protocol.endswith("SSL"):
        if settings.get("ssl.ca.pem"):
            out["kafka.ssl.truststore.type"] = "PEM"
            out["kafka.ssl.truststore.certificates"] = str(settings["ssl.ca.pem"])
        elif settings.get("ssl.ca.location"):
            out["kafka.ssl.truststore.type"] = "PEM"
            out["kafka.ssl.truststore.location"] = str(settings["ssl.ca.location"])
        certificate = _pem(settings, "ssl.certificate.pem", "ssl.certificate.location")
        client_key = _pem(settings, "ssl.key.pem", "ssl.key.location")
        if (certificate is None) != (client_key is None):
            raise SecuritySettingsError("a client certificate needs both ssl.certificate.* and ssl.key.* "
                                        "(.pem or .location) in the backend settings")
        if certificate is not None and client_key is not None:
            out["kafka.ssl.keystore.type"] = "PEM"
            out["kafka.ssl.keystore.certificate.chain"] = certificate
            out["kafka.ssl.keystore.key"] = client_key
            if settings.get("ssl.key.password"):
                out["kafka.ssl.key.password"] = str(settings["ssl.key.password"])
        if str(settings.get("ssl.endpoint.identification.algorithm", "https")).lower() == "none":
            out["kafka.ssl.endpoint.identification.algorithm"] = ""
    return out


SETTINGS_ENV = "PYCONNECT_SPARK_KAFKA_SETTINGS"
"""The environment variable through which :class:`airflow_pyconnect.operators.spark_submit.PyConnectSparkSubmitOperator`
hands a Spark job its Kafka security settings (JSON, :func:`handoff_settings`), read by :func:`handed_settings`."""

_INLINED = (("ssl.ca.location", "ssl.ca.pem"), ("ssl.certificate.location", "ssl.certificate.pem"),
            ("ssl.key.location", "ssl.key.pem"))


def handoff_settings(settings: Mapping[str, Any] | None) -> dict[str, str]:
    """The security part of the backend's librdkafka settings, as a Spark job on another machine can use it: only
    ``security.*``, ``sasl.*``, ``ssl.*`` (no producer or consumer settings), each PEM file a ``ssl.*.location`` names
    read here and handed over inline (``ssl.*.pem``: the executors need not hold the worker's files), checked by
    :func:`kafka_security_options`. Empty for a PLAINTEXT backend. The result holds secrets (the password, the key).

    :raises SecuritySettingsError: naming the setting (never its value) Spark's Kafka source cannot be given.
    :raises OSError: naming the path of a PEM file that cannot be read.
    """
    handed = {str(k): str(v) for k, v in (settings or {}).items()
              if str(k).startswith(_SECURITY_PREFIXES) and v is not None and v != ""}
    kafka_security_options(handed)
    for location, inline in _INLINED:
        path = handed.pop(location, None)
        if path is not None and inline not in handed:
            handed[inline] = Path(path).expanduser().read_text()
    if str(handed.get("security.protocol", "PLAINTEXT")).upper() == "PLAINTEXT":
        return {}
    return handed


_handed: dict[str, str] | None = None


def handed_settings(*, required: bool = False) -> dict[str, str]:
    """In a Spark job's driver: the Kafka security settings the submitting operator handed over in the environment
    (:data:`SETTINGS_ENV`, set by ``PyConnectSparkSubmitOperator`` from its ``pyconnect`` connection at run time), for
    :func:`connect_runtime.spark.read_kafka_range`'s ``settings``. The variable is removed from this process's
    environment on the first call (processes the job starts do not inherit it); later calls return the same.

    :param required: fail when nothing was handed over (a secured backend's job submitted by a plain
        ``SparkSubmitOperator``, or in cluster deploy mode); otherwise ``{}`` then (a PLAINTEXT backend).
    :raises ValueError: naming the variable (never its value) when it is not a JSON object of strings, or is
        missing while ``required``.
    """
    global _handed
    if _handed is None:
        raw = os.environ.pop(SETTINGS_ENV, None)
        if raw is not None:
            try:
                value = json.loads(raw)
            except ValueError:
                value = None
            if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
                raise ValueError(f"${SETTINGS_ENV} must hold a JSON object of strings (Kafka client settings); "
                                 "it does not (its value is not shown: it holds secrets)")
            _handed = value
    if _handed is None:
        if required:
            raise ValueError(f"no Kafka settings were handed to this Spark job (${SETTINGS_ENV} is not set): submit "
                             "it with airflow_pyconnect's PyConnectSparkSubmitOperator in client deploy mode, or set "
                             "the variable from your cluster's secret store")
        return {}
    return dict(_handed)


def range_topics(ranges: Any) -> list[str]:
    """The topics ``ranges`` (any shape :func:`kafka_read_options` takes) name, sorted."""
    return sorted(_read_spans(ranges))


def kafka_read_options(ranges: Any, bootstrap: str, *, fail_on_data_loss: bool = True,
                       options: Mapping[str, Any] | None = None, topics: Collection[str] | None = None,
                       settings: Mapping[str, Any] | None = None) -> list[dict[str, str]]:
    """Options of ``spark.read.format("kafka")`` that read exactly the committed records of ``ranges``.

    :param ranges: a source run's committed ranges (``{topic: {"<p>": [from, to]}}``, span lists, a whole
        run result or a :func:`airflow_pyconnect.spark.spark_handoff` XCom, or their JSON), or an offset
        target (``{topic: {"<p>": next offset}}``, a sink run's result), read from the earliest offset.
    :param bootstrap: ``host:port[,host:port]`` or the ``kafka://`` backend URL.
    :param fail_on_data_loss: Spark's ``failOnDataLoss``: fail when records of the range are gone (retention).
    :param options: more options, over these (``kafka.security.protocol``, ``kafka.sasl.jaas.config``, ...).
    :param topics: read only these topics of ``ranges`` (default: all).
    :param settings: the backend's librdkafka client settings, their security part translated by
        :func:`kafka_security_options` (``options`` win over it).
    :return: one option set per read: one when every partition has one span; when another writer's records
        sit between spans of a partition, one per round of spans (the i-th span of each partition), to union.
        Empty when the ranges hold nothing.
    """
    spans = _read_spans(ranges)
    if topics is not None:
        spans = {t: parts for t, parts in spans.items() if t in set(topics)}
    rounds = max((len(s) for parts in spans.values() for s in parts.values()), default=0)
    base = {
        "kafka.bootstrap.servers": bootstrap_servers(bootstrap),
        "kafka.isolation.level": "read_committed",
        "failOnDataLoss": "true" if fail_on_data_loss else "false",
        **kafka_security_options(settings),
    }
    reads: list[dict[str, str]] = []
    for i in range(rounds):
        assign: dict[str, list[int]] = {}
        starting: dict[str, dict[str, int]] = {}
        ending: dict[str, dict[str, int]] = {}
        for topic in sorted(spans):
            for partition in sorted(spans[topic]):
                if i < len(spans[topic][partition]):
                    first, end = spans[topic][partition][i]
                    assign.setdefault(topic, []).append(partition)
                    starting.setdefault(topic, {})[str(partition)] = first
                    ending.setdefault(topic, {})[str(partition)] = end
        read = dict(base)
        read["assign"] = json.dumps(assign, separators=(",", ":"))
        read["startingOffsets"] = json.dumps(starting, separators=(",", ":"))
        read["endingOffsets"] = json.dumps(ending, separators=(",", ":"))
        read.update({str(k): str(v) for k, v in (options or {}).items()})
        if "kafka.group.id" not in read and "groupIdPrefix" not in read:
            read["kafka.group.id"] = consumer_group_id(read)
        reads.append(read)
    return reads


def consumer_group_id(options: Mapping[str, str]) -> str:
    """``pyconnect-spark-<hash>``: one group id per set of consumer settings (the ``kafka.*`` options), so Spark
    reuses its pooled consumers across queries with the same settings and never mixes settings under one id."""
    kafka = sorted((k, v) for k, v in options.items() if k.startswith("kafka.") and k != "kafka.group.id")
    digest = hashlib.sha256(json.dumps(kafka).encode()).hexdigest()[:16]
    return f"pyconnect-spark-{digest}"


__all__ = ["AVRO_ARTIFACT", "EARLIEST", "FETCH_COMMAND", "HOME_ENV", "SETTINGS_ENV", "SecuritySettingsError",
           "bootstrap_servers", "consumer_group_id", "handed_settings", "handoff_settings", "kafka_jars",
           "kafka_read_options", "kafka_security_options", "pyspark_versions", "range_topics", "spark_kafka_home"]
