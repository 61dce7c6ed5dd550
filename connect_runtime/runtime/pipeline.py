"""The transform + convert + error-tolerance pipeline between tasks and the backend.

Source path (per ``poll()`` batch): transformations in ``transforms`` order, each guarded by its
predicate (``transforms.<t>.predicate``, inverted by ``transforms.<t>.negate``) → key, value and
header converters → :class:`~connect_runtime.backends.base.ProducerRecord`. Sink path: the
converters' ``to_connect`` → transformations → :class:`~connect_runtime.api.records.SinkRecord`.

Failures. A converter, transformation or predicate that raises makes the record fail; so does a
source record whose value is a :class:`~connect_runtime.api.errors.DataError`: a record the task
could not read (a malformed line of a file), handed over with its source offset so that the
runtime, not the connector, applies ``errors.tolerance`` (stage ``TASK_POLL``, as in Kafka Connect):

- ``errors.tolerance=none``: :meth:`process` raises :class:`RecordError` (a ``DataError``) whose
  message names the record (source: topic, source partition and offset; sink: topic, partition,
  offset), the stage and the plugin; the original exception is chained as ``__cause__``.
- ``errors.tolerance=all``: the record is left out and reported, never silently lost: a source
  record in :attr:`SourceBatch.skipped`, a sink record in :attr:`SinkBatch.dead` with its error
  (the sink run loop writes it with :meth:`SinkPipeline.dead_letter` when
  :attr:`SinkPipeline.dead_letter_topic` is set, and only counts it otherwise).
- ``errors.log.enable=true`` logs every failure (with the record's key and value only when
  ``errors.log.include.messages=true``), whatever the tolerance.

Speed. Conversion runs as one list comprehension per batch inside one ``try``; with the default
JSON value converter the values are encoded as a batch (:meth:`JsonConverter.encode_many`, orjson)
and decoded with orjson (or the C JSON scanner) inline; StringConverter and ByteArrayConverter convert
a batch's values at once too (``encode_many`` / ``decode_many``). If anything in the batch fails,
the batch is redone record by record to find, name and (under ``all``) drop the bad records; the
redo gives the same bytes for every good record. The cyclic garbage collector is paused while a
batch is processed (see :func:`_gc_paused`).
"""

from __future__ import annotations

import gc
import logging
import traceback
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from operator import itemgetter
from typing import Any, NamedTuple

import orjson

from connect_runtime.api.config import ConfigDef, Type, non_empty_string
from connect_runtime.api.errors import ConfigError, DataError
from connect_runtime.api.records import Headers, SinkRecord, SourceRecord
from connect_runtime.api.transforms import Converter, Predicate, Transformation
from connect_runtime.backends.base import ConsumedRecord, ProducerRecord, WireHeaders
from connect_runtime.converters import JsonConverter
from connect_runtime.runtime.config import SINK_CONFIG, SOURCE_CONFIG
from connect_runtime.runtime.plugins import instantiate

# Importing the built-in transforms registers their Kafka Connect names in plugins.ALIASES.
import connect_runtime.transforms  # noqa: F401  # isort: skip

log = logging.getLogger(__name__)


class SourceBatch(NamedTuple):
    """What one ``poll()`` batch became; every polled record is in exactly one of ``sent``,
    ``filtered`` and ``skipped``, each in poll order."""

    out: list[ProducerRecord]          # converted records to write, in poll order
    sent: list[SourceRecord]           # the ORIGINAL polled record behind each entry of ``out`` (same index)
    filtered: list[SourceRecord]       # originals a transform dropped (-> commit_record(r, None))
    skipped: list[SourceRecord]        # originals that failed transform/convert under errors.tolerance=all


class SinkBatch(NamedTuple):
    """What one consumed batch became: ``len(records) + len(dead) + filtered == len(batch)``;
    ``records`` and ``dead`` are in consumption order."""

    records: list[SinkRecord]                          # decoded + transformed, for put()
    dead: list[tuple[ConsumedRecord, BaseException]]   # failed convert/transform under tolerance=all
    filtered: int                                      # dropped by a transform


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


class _Pipeline:
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
        # The fast path converts the values of a batch at once where the value converter can (the built-in
        # ones: encode_many / decode_many); any other value converter is called per record.
        self._json_value = type(vc) is JsonConverter
        self._encode_many = _batch_method(vc, "encode_many", "from_connect")
        self._decode_many = None if self._json_value else _batch_method(vc, "decode_many", "to_connect")

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
        if not self.tolerate_all:
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


def _batch_method(converter: Converter, batch: str, single: str) -> Any:
    """The converter's batch method (``encode_many`` / ``decode_many``) where the class that defines it also
    defines the one-record method it stands for: a subclass that overrides ``from_connect`` but not
    ``encode_many`` is called record by record, so its override counts."""
    owner = {name: next((c for c in type(converter).__mro__ if name in vars(c)), None) for name in (batch, single)}
    if owner[batch] is None or owner[batch] is not owner[single]:
        return None
    return getattr(converter, batch)


@contextmanager
def _gc_paused() -> Iterator[None]:
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


def _describe_source(r: SourceRecord) -> str:
    return (f"source record for topic {r.topic!r} (source partition {r.source_partition!r}, "
            f"source offset {r.source_offset!r})")


def _describe_sink(r: ConsumedRecord) -> str:
    return f"sink record at topic {r.topic!r} partition {r.partition} offset {r.offset}"


class SourcePipeline(_Pipeline):
    """Transforms then converts each ``poll()`` batch; see the module docstring."""

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> SourcePipeline:
        """``config``: the raw connector config (strings or typed values). Raises one ConfigError
        naming every bad converter, transform and predicate field."""
        return cls(config, _SOURCE_SETTINGS)

    def process(self, records: list[SourceRecord]) -> SourceBatch:
        """Transform then convert; DataError naming the record when errors.tolerance=none."""
        with _gc_paused():
            return self._process(records)

    def _process(self, records: list[SourceRecord]) -> SourceBatch:
        filtered: list[SourceRecord] = []
        skipped: list[SourceRecord] = []
        if self.steps:
            sent: list[SourceRecord] = []
            recs: list[SourceRecord] = []
            transform = self._transform
            for r in records:
                if isinstance(r.value, DataError):  # the task could not read it: no transform applies
                    self._failed(_describe_source(r), TASK_POLL, r.value, r.value, r.key, None)
                    skipped.append(r)
                    continue
                out, step, exc, in_predicate = transform(r)
                if exc is not None:
                    assert step is not None
                    self._step_failed(_describe_source(r), step, exc, in_predicate, r.key, r.value)
                    skipped.append(r)
                elif out is None:
                    filtered.append(r)
                else:
                    sent.append(r)
                    recs.append(out)
        else:
            sent = list(records)
            recs = sent
        try:
            out = self._convert_batch(recs)
        except Exception:
            out = None  # redone below, outside this handler, so errors don't chain to the batch's
        if out is None:
            failed_in_transforms = len(skipped)
            out, sent = self._convert_each(sent, recs, skipped)
            if 0 < failed_in_transforms < len(skipped):  # failed in both stages: back to poll order
                position = {id(r): i for i, r in enumerate(records)}
                skipped.sort(key=lambda r: position[id(r)])
        return SourceBatch(out, sent, filtered, skipped)

    def _convert_batch(self, recs: list[SourceRecord]) -> list[ProducerRecord]:
        new, PR = tuple.__new__, ProducerRecord
        kconv = self.key_converter.from_connect
        hconv = self._wire_headers
        encode_many = self._encode_many
        if encode_many is not None:
            values = encode_many([r.value for r in recs])
            return [
                new(PR, (r.topic, r.partition,
                         None if (k := r.key) is None else kconv(r.topic, k, r.headers),
                         v, r.timestamp,
                         None if (h := r.headers) is None else hconv(r.topic, h)))
                for r, v in zip(recs, values)  # noqa: B905 - the same length by construction
            ]
        vconv = self.value_converter.from_connect
        return [
            new(PR, (r.topic, r.partition,
                     None if (k := r.key) is None else kconv(r.topic, k, r.headers),
                     vconv(r.topic, r.value, r.headers),
                     r.timestamp,
                     None if (h := r.headers) is None else hconv(r.topic, h)))
            for r in recs
        ]

    def _wire_headers(self, topic: str, headers: Headers) -> WireHeaders:
        hconv = self.header_converter.from_connect
        return [(n, v if v is None or type(v) is bytes else hconv(topic, v, None)) for n, v in headers]

    def _convert_each(self, sent: list[SourceRecord], recs: list[SourceRecord],
                      skipped: list[SourceRecord]) -> tuple[list[ProducerRecord], list[SourceRecord]]:
        """The batch failed somewhere: convert record by record, naming (or skipping) bad ones."""
        out: list[ProducerRecord] = []
        kept: list[SourceRecord] = []
        kc, vc, hc = self.key_converter, self.value_converter, self.header_converter
        for orig, r in zip(sent, recs, strict=True):
            stage = KEY_CONVERTER
            plugin: object = kc
            try:
                if isinstance(r.value, DataError):
                    stage, plugin = TASK_POLL, r.value
                    raise r.value
                key = None if r.key is None else kc.from_connect(r.topic, r.key, r.headers)
                stage, plugin = VALUE_CONVERTER, vc
                value = vc.from_connect(r.topic, r.value, r.headers)
                stage, plugin = HEADER_CONVERTER, hc
                headers = None if r.headers is None else self._wire_headers(r.topic, r.headers)
            except Exception as exc:
                self._failed(_describe_source(orig), stage, plugin, exc, orig.key, orig.value)
                skipped.append(orig)
                continue
            out.append(ProducerRecord(r.topic, r.partition, key, value, r.timestamp, headers))
            kept.append(orig)
        return out, kept


_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_LONG_DIGITS = b"0" * 19
"""19 digits in a row (found as 19 zeros once every digit is a zero: a C translate and a substring search,
about 8x faster than a regular expression over the batch): maybe an integer beyond 64 bits, which orjson
reads as a float (json: exactly)."""
_value_of = itemgetter(4)


def _loads_many(records: list[ConsumedRecord]) -> list[Any] | None:
    """Every record's value decoded by orjson (about 2x json's scanner on small objects), or ``None`` when
    the batch must go through :mod:`json` instead: a tombstone, a run of 19 digits anywhere (an integer
    orjson would turn into a float, or a false alarm), or any value orjson refuses (invalid JSON, and what
    only json accepts: ``NaN``, ``Infinity``, numbers beyond float range, lone surrogate escapes), so
    values and errors are exactly json's."""
    data = list(map(_value_of, records))
    if None in data or b"\n".join(data).translate(_DIGITS_AS_ZERO).find(_LONG_DIGITS) != -1:
        return None
    try:
        return list(map(orjson.loads, data))
    except (orjson.JSONDecodeError, TypeError):
        return None


def _sink_records(records: list[ConsumedRecord], values: list[Any], kconv: Any, hconv: Any) -> list[SinkRecord]:
    """The SinkRecords of a batch whose values are converted already. Made with ``object.__new__`` and plain
    attribute stores, which CPython runs about twice as fast as a call of ``SinkRecord(**fields)``; the
    records are the same (every slot set)."""
    new, SR = object.__new__, SinkRecord
    out: list[SinkRecord] = []
    append = out.append
    for (t, p, o, k, _, ts, h), v in zip(records, values):  # noqa: B905 - the same length by construction
        r = new(SR)
        r.topic = t
        r.partition = p
        r.offset = o
        r.key = None if k is None else kconv(t, k, None)
        r.value = v
        r.timestamp = ts
        r.headers = None if h is None else hconv(t, h)
        append(r)
    return out


class SinkPipeline(_Pipeline):
    """Converts then transforms each consumed batch; builds dead letter records."""

    def __init__(self, config: Mapping[str, Any], settings_def: ConfigDef, task_id: int | None = None) -> None:
        super().__init__(config, settings_def)
        self.dead_letter_topic: str | None = (self.settings["errors.deadletterqueue.topic.name"] or "").strip() or None
        """Where :meth:`dead_letter` records go; ``None`` when not set (dead records are then only
        counted, never written)."""
        self.context_headers = bool(self.settings["errors.deadletterqueue.context.headers.enable"])
        self.task_id = task_id

    @classmethod
    def from_config(cls, config: Mapping[str, Any], *, task_id: int | None = None) -> SinkPipeline:
        """``config``: the raw connector config. ``task_id`` (optional) goes into the
        ``__connect.errors.task.id`` dead letter header."""
        return cls(config, _SINK_SETTINGS, task_id)

    def process(self, records: list[ConsumedRecord]) -> SinkBatch:
        """Convert then transform; DataError naming the record when errors.tolerance=none."""
        with _gc_paused():
            return self._process(records)

    def _process(self, records: list[ConsumedRecord]) -> SinkBatch:
        dead: list[tuple[ConsumedRecord, BaseException]] = []
        origs: list[ConsumedRecord] = records
        try:
            recs = self._convert_batch(records)
        except Exception:
            recs = None  # redone below, outside this handler, so errors don't chain to the batch's
        if recs is None:
            origs, recs = self._convert_each(records, dead)
        if not self.steps:
            return SinkBatch(recs, dead, 0)
        out: list[SinkRecord] = []
        filtered = 0
        transform = self._transform
        for c, r in zip(origs, recs, strict=True):
            res, step, exc, in_predicate = transform(r)
            if exc is not None:
                assert step is not None
                dead.append((c, self._step_failed(_describe_sink(c), step, exc, in_predicate, c.key, c.value)))
            elif res is None:
                filtered += 1
            else:
                out.append(res)
        if len(dead) > 1 and len(origs) < len(records):  # failed in both stages: back to consumption order
            position = {id(c): i for i, c in enumerate(records)}
            dead.sort(key=lambda d: position[id(d[0])])
        return SinkBatch(out, dead, filtered)

    def _convert_batch(self, records: list[ConsumedRecord]) -> list[SinkRecord]:
        SR = SinkRecord
        kconv = self.key_converter.to_connect
        hconv = self._connect_headers
        if self._json_value:
            values = _loads_many(records)
            if values is not None:
                return _sink_records(records, values, kconv, hconv)
            # The JSON scanner straight away; the full decoder only when the scan did not consume
            # the whole text (trailing blanks or garbage), so errors and edge cases stay its own.
            dec = self.value_converter.decode  # type: ignore[attr-defined]
            scan = self.value_converter.scan  # type: ignore[attr-defined]
            return [
                SR(topic=t, partition=p, offset=o,
                   key=None if k is None else kconv(t, k, None),
                   value=None if v is None else (
                       dec(s) if (r := scan(s := v.decode(), 0))[1] != len(s) else r[0]),
                   timestamp=ts, headers=None if h is None else hconv(t, h))
                for t, p, o, k, v, ts, h in records
            ]
        decode_many = self._decode_many
        if decode_many is not None:  # StringConverter, ByteArrayConverter: the values of the batch at once
            return _sink_records(records, decode_many(list(map(_value_of, records))), kconv, hconv)
        vconv = self.value_converter.to_connect
        return [
            SR(topic=t, partition=p, offset=o,
               key=None if k is None else kconv(t, k, None),
               value=vconv(t, v, None),
               timestamp=ts, headers=None if h is None else hconv(t, h))
            for t, p, o, k, v, ts, h in records
        ]

    def _connect_headers(self, topic: str, headers: WireHeaders) -> Headers:
        hconv = self.header_converter.to_connect
        return [(n, None if v is None else hconv(topic, v, None)) for n, v in headers]

    def _convert_each(self, records: list[ConsumedRecord], dead: list[tuple[ConsumedRecord, BaseException]]
                      ) -> tuple[list[ConsumedRecord], list[SinkRecord]]:
        origs: list[ConsumedRecord] = []
        out: list[SinkRecord] = []
        kc, vc, hc = self.key_converter, self.value_converter, self.header_converter
        for c in records:
            stage, plugin = KEY_CONVERTER, kc
            try:
                key = None if c.key is None else kc.to_connect(c.topic, c.key, None)
                stage, plugin = VALUE_CONVERTER, vc
                value = vc.to_connect(c.topic, c.value, None)
                stage, plugin = HEADER_CONVERTER, hc
                headers = None if c.headers is None else self._connect_headers(c.topic, c.headers)
            except Exception as exc:
                dead.append((c, self._failed(_describe_sink(c), stage, plugin, exc, c.key, c.value)))
                continue
            origs.append(c)
            out.append(SinkRecord(topic=c.topic, partition=c.partition, offset=c.offset, key=key,
                                  value=value, timestamp=c.timestamp, headers=headers))
        return origs, out

    def dead_letter(self, record: ConsumedRecord, error: BaseException) -> ProducerRecord:
        """The DLQ record for a failed one (topic = errors.deadletterqueue.topic.name, original key/value
        bytes, headers __connect.errors.* when context headers are enabled)."""
        topic = self.dead_letter_topic
        if topic is None:
            raise ConfigError(errors={
                "errors.deadletterqueue.topic.name": "expected a topic name: a record was dead-lettered but "
                "no dead letter topic is configured (check SinkPipeline.dead_letter_topic first)"})
        headers: WireHeaders | None = list(record.headers) if record.headers is not None else None
        if self.context_headers:
            headers = (headers or []) + self._context_headers(record, error)
        return ProducerRecord(topic, None, record.key, record.value, record.timestamp, headers)

    def _context_headers(self, record: ConsumedRecord, error: BaseException) -> WireHeaders:
        # Kafka Connect reports the exception the failing stage threw, and the stage's plugin class.
        cause = error.__cause__ if isinstance(error, RecordError) and error.__cause__ is not None else error
        h: WireHeaders = [
            ("__connect.errors.topic", record.topic.encode()),
            ("__connect.errors.partition", str(record.partition).encode()),
            ("__connect.errors.offset", str(record.offset).encode()),
            ("__connect.errors.connector.name", self.connector_name.encode()),
        ]
        if self.task_id is not None:
            h.append(("__connect.errors.task.id", str(self.task_id).encode()))
        if isinstance(error, RecordError):
            h.append(("__connect.errors.stage", error.stage.encode()))
            h.append(("__connect.errors.class.name", error.plugin.encode()))
        h.append(("__connect.errors.exception.class.name", _class_name(cause).encode()))
        h.append(("__connect.errors.exception.message", str(cause).encode("utf-8", "replace")))
        h.append(("__connect.errors.exception.stacktrace",
                  "".join(traceback.format_exception(cause)).encode("utf-8", "replace")))
        return h


__all__ = [
    "HEADER_CONVERTER",
    "KEY_CONVERTER",
    "TASK_POLL",
    "TRANSFORMATION",
    "VALUE_CONVERTER",
    "RecordError",
    "SinkBatch",
    "SinkPipeline",
    "SourceBatch",
    "SourcePipeline",
]
