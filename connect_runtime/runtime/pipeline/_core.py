"""The pipeline's core: failure stages and :class:`RecordError`, the transformation steps (each with its
predicate) built from a connector config, and :class:`Pipeline`, which both directions extend
(:mod:`.source`, :mod:`.sink`). See the package docstring for the semantics."""

from __future__ import annotations

import gc
import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple

from connect_runtime.api.config import ConfigDef, Type, non_empty_string
from connect_runtime.api.errors import ConfigError, DataError
from connect_runtime.api.records import Headers
from connect_runtime.api.transforms import Converter, Predicate, Transformation
from connect_runtime.converters import JsonConverter
from connect_runtime.runtime.config import SINK_CONFIG, SOURCE_CONFIG
from connect_runtime.runtime.plugins import instantiate

log = logging.getLogger(__name__)


KEY_CONVERTER = "KEY_CONVERTER"
VALUE_CONVERTER = "VALUE_CONVERTER"
HEADER_CONVERTER = "HEADER_CONVERTER"
TRANSFORMATION = "TRANSFORMATION"
TASK_POLL = "TASK_POLL"
_STAGE_TEXT = {
    TASK_POLL: "poll() of the source task, which could not read it",
    KEY_CONVERTER: "the key converter",
    VALUE_CONVERTER: "the value converter",
    HEADER_CONVERTER: "the header converter",
}


class RecordError(DataError):
    """One record failed in one pipeline stage.

    ``stage`` is Kafka Connect's stage name (``KEY_CONVERTER``, ``VALUE_CONVERTER``,
    ``HEADER_CONVERTER``, ``TRANSFORMATION``), ``plugin`` the dotted class name of the converter,
    transformation or predicate that failed, ``transform`` the alias of the transformation (or
    ``None``); ``__cause__`` is the exception the plugin raised.
    """

    def __init__(self, message: str, *, stage: str, plugin: str, transform: str | None = None) -> None:
        super().__init__(message)
        self.stage = stage
        self.plugin = plugin
        self.transform = transform


class _Step(NamedTuple):
    alias: str
    transform: Transformation[Any]
    predicate: Predicate[Any] | None
    negate: bool
    predicate_alias: str | None


def _class_name(obj: object) -> str:
    cls = obj if isinstance(obj, type) else type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def _with_prefix(config: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    n = len(prefix)
    return {k[n:]: v for k, v in config.items() if k.startswith(prefix)}


def _prefixed_errors(exc: ConfigError, prefix: str) -> dict[str, str]:
    if exc.errors:
        return {prefix + name: why for name, why in exc.errors.items()}
    return {prefix.rstrip("."): str(exc)}


def _converter(config: Mapping[str, Any], field: str, path: str, is_key: bool,
               errors: dict[str, str]) -> Converter:
    try:
        conv: Converter = instantiate(path, field, Converter)
    except ConfigError as exc:
        errors.update(exc.errors or {field: str(exc)})
        return JsonConverter()  # placeholder so the remaining fields still get validated
    try:
        conv.configure(_with_prefix(config, field + "."), is_key)
    except ConfigError as exc:
        errors.update(_prefixed_errors(exc, field + "."))
    except Exception as exc:
        errors[field] = f"converter {path!r} could not be configured: {type(exc).__name__}: {exc}"
    return conv


_STEP_CONFIG = (
    ConfigDef()
    .define("type", Type.STRING, validator=non_empty_string,
            doc="Class of the transformation: a dotted path or a Kafka Connect name.")
    .define("predicate", Type.STRING, default=None, doc="Alias of the predicate guarding it.")
    .define("negate", Type.BOOLEAN, default=False, doc="Apply it where the predicate is false.")
)
_PREDICATE_CONFIG = ConfigDef().define(
    "type", Type.STRING, validator=non_empty_string,
    doc="Class of the predicate: a dotted path or a Kafka Connect name.",
)


def _configure(plugin: Any, configs: dict[str, Any], prefix: str, errors: dict[str, str]) -> bool:
    try:
        plugin.configure(configs)
    except ConfigError as exc:
        errors.update(_prefixed_errors(exc, prefix))
        return False
    except Exception as exc:
        errors[prefix + "type"] = (
            f"{_class_name(plugin)} could not be configured: {type(exc).__name__}: {exc}"
        )
        return False
    return True


def _steps(config: Mapping[str, Any], transforms: Sequence[str], predicates: Sequence[str],
           errors: dict[str, str], created: list[Any]) -> list[_Step]:
    """The configured transformation chain; every plugin made is appended to ``created`` (to close)."""
    by_alias: dict[str, Predicate[Any]] = {}
    for alias in _unique(predicates, "predicates", errors):
        prefix = f"predicates.{alias}."
        own = _with_prefix(config, prefix)
        try:
            path = _PREDICATE_CONFIG.parse(own)["type"].strip()
        except ConfigError as exc:
            errors.update(_prefixed_errors(exc, prefix))
            continue
        try:
            predicate = instantiate(path, prefix + "type", Predicate)
        except ConfigError as exc:
            errors.update(exc.errors or {prefix + "type": str(exc)})
            continue
        created.append(predicate)
        own.pop("type", None)
        if _configure(predicate, own, prefix, errors):
            by_alias[alias] = predicate

    steps: list[_Step] = []
    for alias in _unique(transforms, "transforms", errors):
        prefix = f"transforms.{alias}."
        own = _with_prefix(config, prefix)
        try:
            settings = _STEP_CONFIG.parse(own)
        except ConfigError as exc:
            errors.update(_prefixed_errors(exc, prefix))
            continue
        try:
            transform = instantiate(settings["type"].strip(), prefix + "type", Transformation)
        except ConfigError as exc:
            errors.update(exc.errors or {prefix + "type": str(exc)})
            continue
        created.append(transform)
        pred_alias = settings["predicate"].strip() if settings["predicate"] else None
        predicate = None
        if pred_alias is not None:
            if pred_alias not in predicates:
                listed = ", ".join(predicates) or "none are"
                errors[prefix + "predicate"] = (
                    f"expected the alias of a predicate listed in predicates ({listed}), got {pred_alias!r}"
                )
                continue
            predicate = by_alias.get(pred_alias)  # None: its own config failed, already reported
        elif settings["negate"]:
            errors[prefix + "negate"] = f"expected negate only together with {prefix}predicate"
            continue
        own.pop("predicate", None)
        own.pop("negate", None)
        if _configure(transform, own, prefix, errors):
            steps.append(_Step(alias, transform, predicate, settings["negate"], pred_alias))
    return steps


def _unique(aliases: Sequence[str], field: str, errors: dict[str, str]) -> list[str]:
    seen: list[str] = []
    for alias in aliases:
        if alias in seen:
            errors[field] = f"expected each alias once, got {alias!r} twice"
        else:
            seen.append(alias)
    return seen


_COMMON_FIELDS = (
    "key.converter", "value.converter", "header.converter", "transforms", "predicates",
    "errors.tolerance", "errors.log.enable", "errors.log.include.messages",
)
_SOURCE_SETTINGS = ConfigDef(SOURCE_CONFIG.keys[n] for n in _COMMON_FIELDS)
_SINK_SETTINGS = ConfigDef(
    SINK_CONFIG.keys[n] for n in (
        *_COMMON_FIELDS, "errors.deadletterqueue.topic.name", "errors.deadletterqueue.context.headers.enable",
    )
)


class Pipeline:
    """What both directions share: plugins built from the config, failure handling, close."""

    def __init__(self, config: Mapping[str, Any], settings_def: ConfigDef) -> None:
        errors: dict[str, str] = {}
        settings = settings_def.parse(config)
        self.connector_name = str(config.get("name") or "")
        self.key_converter = _converter(config, "key.converter", settings["key.converter"], True, errors)
        self.value_converter = _converter(config, "value.converter", settings["value.converter"], False, errors)
        self.header_converter = _converter(config, "header.converter", settings["header.converter"], False,
                                           errors)
        self._plugins: list[Any] = [self.key_converter, self.value_converter, self.header_converter]
        self.steps = _steps(config, settings["transforms"], settings["predicates"], errors, self._plugins)
        if errors:
            self.close()
            raise ConfigError(errors=errors)
        self.tolerate_all = settings["errors.tolerance"].lower() == "all"
        self.log_errors = bool(settings["errors.log.enable"])
        self.log_messages = bool(settings["errors.log.include.messages"])
        self.settings = settings
        vc = self.value_converter
        self.key_schemas = bool(self.key_converter.SCHEMA_AWARE)
        self.value_schemas = bool(vc.SCHEMA_AWARE)
        self.schema_aware = self.key_schemas or self.value_schemas
        """A schema-aware key or value converter (Avro, JSON with schemas.enable=true, ...): records are converted
        one by one with ``from_connect_data`` / ``to_connect_data`` and carry ``key_schema`` / ``value_schema``.
        Otherwise the schemaless fast path below; a record that fails there (a Struct value, say) is redone one by
        one, where a record's schema reaches the converter's ``from_connect_data``."""
        # The fast path converts the values of a batch at once where the value converter can (the built-in
        # ones: encode_many / decode_many); any other value converter is called per record.
        self._json_value = type(vc) is JsonConverter and not self.schema_aware
        self._encode_many = None if self.schema_aware else _batch_method(vc, "encode_many", "from_connect")
        self._decode_many = None if self._json_value or self.schema_aware else _batch_method(
            vc, "decode_many", "to_connect")

    def _failed(self, what: str, stage: str, plugin: object, exc: Exception, key: Any, value: Any,
                transform: str | None = None, where: str | None = None) -> RecordError:
        """The RecordError for a failed record, logged if asked; raised under tolerance=none."""
        if where is None:
            where = _STAGE_TEXT[stage] if stage == TASK_POLL else f"{_STAGE_TEXT[stage]} ({_class_name(plugin)})"
        err = RecordError(f"{what} failed in {where}: {type(exc).__name__}: {exc}",
                          stage=stage, plugin=_class_name(plugin), transform=transform)
        err.__cause__ = exc
        if self.log_errors:
            extra = f" (key={key!r}, value={value!r})" if self.log_messages else ""
            log.error("%s%s; errors.tolerance=%s", err, extra, "all" if self.tolerate_all else "none")
        if not self.tolerate_all or isinstance(exc, ConfigError):  # a wrong setting is no bad record: never skipped
            raise err from exc
        return err

    def _transform(self, record: Any) -> tuple[Any, _Step | None, Exception | None, bool]:
        """(result, or None if filtered; the failing step, its exception, whether its predicate raised)."""
        step = None
        testing = False
        try:
            for step in self.steps:
                predicate = step.predicate
                if predicate is not None:
                    testing = True
                    hit = predicate.test(record)
                    testing = False
                    if bool(hit) == step.negate:
                        continue
                record = step.transform.apply(record)
                if record is None:
                    break
        except Exception as exc:
            return None, step, exc, testing
        return record, None, None, False

    def _step_failed(self, what: str, step: _Step, exc: Exception, in_predicate: bool,
                     key: Any, value: Any) -> RecordError:
        if in_predicate:
            plugin: object = step.predicate
            where = (f"predicate {step.predicate_alias!r} ({_class_name(plugin)}) of transformation "
                     f"{step.alias!r}")
        else:
            plugin = step.transform
            where = f"transformation {step.alias!r} ({_class_name(plugin)})"
        return self._failed(what, TRANSFORMATION, plugin, exc, key, value, step.alias, where)

    def close(self) -> None:
        """Close every transformation, predicate and converter (errors are logged, not raised)."""
        for plugin in self._plugins:
            close = getattr(plugin, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:
                    log.warning("closing %s failed", _class_name(plugin), exc_info=True)


def to_bytes(converter: Converter, aware: bool, topic: str, schema: Any, value: Any,
             headers: Headers | None) -> bytes | None:
    """One key or value written by its converter: ``from_connect_data`` with the record's schema where the
    converter is schema-aware or the record has a schema (Kafka Connect's ``fromConnectData``), else the
    schemaless ``from_connect``."""
    if aware or schema is not None:
        return converter.from_connect_data(topic, schema, value, headers)
    return converter.from_connect(topic, value, headers)


def _batch_method(converter: Converter, batch: str, single: str) -> Any:
    """The converter's batch method (``encode_many`` / ``decode_many``) where the class that defines it also
    defines the one-record method it stands for: a subclass that overrides ``from_connect`` but not
    ``encode_many`` is called record by record, so its override counts."""
    owner = {name: next((c for c in type(converter).__mro__ if name in vars(c)), None) for name in (batch, single)}
    if owner[batch] is None or owner[batch] is not owner[single]:
        return None
    return getattr(converter, batch)


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while one batch is processed.

    A batch allocates a few tracked objects per record (tuples, records, dicts) and nothing
    cyclic, yet with many live records around (the poll batch, an open transaction's records)
    the collector's passes cost more than the conversion itself: measured 2.3x slower on 1M small
    JSON records. Collection resumes (and catches up) right after the batch. A caller that
    disabled the collector keeps it disabled; with tasks in several threads, the first batch to
    finish re-enables it, which only costs the others speed.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


