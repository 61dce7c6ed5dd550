"""SqlSink's value coercion and type mapping: the documented JSON forms (the package docstring's table) back
into what each column type takes, per value or a column at a time; the column type auto.create / auto.evolve
choose from the values seen; which field of a refused row could not fit its column."""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, date, datetime
from datetime import time as dtime
from decimal import Decimal, InvalidOperation
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from connect_runtime.api.jsoncodec import JSON_FORMS
from connect_runtime.connectors.sql._errors import short

if TYPE_CHECKING:
    from sqlalchemy import Table

def _b64(v: Any) -> Any:
    if isinstance(v, str):
        try:
            return base64.b64decode(v.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError) as exc:
            raise ValueError(f"base64 text for a binary column ({exc})") from None
    return v


def _decimal(v: Any) -> Any:
    if isinstance(v, str):
        try:
            return Decimal(v)
        except InvalidOperation:
            raise ValueError(f"a decimal number, got {short(v)}") from None
    return v


def _iso(kind: type) -> Callable[[Any], Any]:
    what = {datetime: "date-time", date: "date", dtime: "time"}[kind]

    def conv(v: Any) -> Any:
        if isinstance(v, str):
            s = v[:-1] + "+00:00" if v.endswith(("Z", "z")) else v
            try:
                return kind.fromisoformat(s)  # type: ignore[attr-defined]
            except ValueError:
                raise ValueError(f"an ISO 8601 {what}, got {short(v)}") from None
        if kind is datetime and isinstance(v, (int, float)) and not isinstance(v, bool):

            return datetime.fromtimestamp(v / 1000, UTC)  # epoch milliseconds
        return v
    return conv


_ISO = {kind: _iso(kind) for kind in (datetime, date, dtime)}


def coercer(col_type: Any, copy_json: bool) -> Callable[[Any], Any] | None:
    """The per-value coercion of one column type (None: values go to the driver as they are)."""
    import sqlalchemy as sa

    if isinstance(col_type, sa.JSON):
        return (lambda v: v if v is None else json.dumps(v)) if copy_json else None
    if isinstance(col_type, sa.LargeBinary):
        return _b64
    if isinstance(col_type, sa.Numeric) and not isinstance(col_type, sa.Float):
        return _decimal
    if isinstance(col_type, sa.DateTime):
        return _ISO[datetime]
    if isinstance(col_type, sa.Date):
        return _ISO[date]
    if isinstance(col_type, sa.Time):
        return _ISO[dtime]
    if isinstance(col_type, (sa.String, sa.Text)) and not isinstance(col_type, sa.Enum):
        # an object or array into a text column: its JSON text (a number or bool stays as the driver writes it)
        return _text
    return None


def _text(v: Any) -> Any:
    if isinstance(v, (dict, list)):
        return json.dumps(v)
    conv = _TYPED_TEXT.get(type(v))  # a typed value (a Struct field) into a text column: its plain JSON form
    return v if conv is None else conv(v)


_TYPED_TEXT = {t: c for t, c in JSON_FORMS.items() if t not in (bytes, bytearray, memoryview)}


# A column of values converted at once: ``(values, text_ok) -> values``. ``text_ok``: the values go into a
# PostgreSQL text COPY, so a string whose form PostgreSQL parses exactly as Python does may be passed on
# as it is (checked by Python first, then matched against the strict forms below), saving an object per
# value and its re-rendering by the driver. Raises ValueError/TypeError as the per-value coercion does.
ColumnCoercer = Callable[[Sequence[Any], bool], Sequence[Any]]

_STR, _STR_NONE = frozenset({str}), frozenset({str, type(None)})
_DECIMAL_NONE = frozenset({Decimal, type(None)})
# plain decimal numbers, joined by ",": each is one Decimal and PostgreSQL both read as the same number
_DECIMAL_TEXT = re.compile(r"(?:[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?(?:,|$))+")
_ISO_TEXT = {
    datetime: re.compile(r"(?:[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,6})?"
                         r"(?:[+-][0-9]{2}:[0-9]{2})?(?:,|$))+"),
    date: re.compile(r"(?:[0-9]{4}-[0-9]{2}-[0-9]{2}(?:,|$))+"),
    dtime: re.compile(r"(?:[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,6})?(?:,|$))+"),
}


def _each(conv: Callable[[Any], Any]) -> ColumnCoercer:
    def column(values: Sequence[Any], text_ok: bool) -> Sequence[Any]:
        return [v if v is None else conv(v) for v in values]
    return column


def column_coercer(col_type: Any, copy_json: bool) -> ColumnCoercer | None:
    """The column-at-once form of :func:`coercer` (the same values; see :data:`ColumnCoercer`)."""
    conv = coercer(col_type, copy_json)
    if conv is None:
        return None
    each = _each(conv)
    if conv is _text:
        def text(values: Sequence[Any], text_ok: bool) -> Sequence[Any]:
            return values if set(map(type, values)) <= _STR_NONE else each(values, text_ok)
        return text
    if conv is _decimal:
        def decimal(values: Sequence[Any], text_ok: bool) -> Sequence[Any]:
            kinds = set(map(type, values))
            if kinds <= _DECIMAL_NONE:
                return values  # decimal.Decimal (typed records): bound as they are
            if kinds == _STR:
                if text_ok and _DECIMAL_TEXT.fullmatch(",".join(values)):
                    return values
                try:
                    return list(map(Decimal, values))
                except InvalidOperation:
                    return each(values, text_ok)  # raises, naming the value
            return each(values, text_ok)
        return decimal
    kind = next((k for k, c in _ISO.items() if c is conv), None)
    if kind is None:
        return each
    parse, form = kind.fromisoformat, _ISO_TEXT[kind]

    native = frozenset({kind, type(None)})

    def iso(values: Sequence[Any], text_ok: bool) -> Sequence[Any]:
        kinds = set(map(type, values))
        if kinds <= native:
            return values  # date, time or datetime values (typed records): bound as they are
        if kinds == _STR:
            try:
                parsed = list(map(parse, values))
            except ValueError:
                return each(values, text_ok)  # "...z", or raises naming the value
            if text_ok and form.fullmatch(",".join(values)):
                return values
            return parsed
        return each(values, text_ok)
    return iso


# auto.create / auto.evolve: which strings are typed values (see the package docstring). Strict on purpose:
# a column gets a type only when every value seen reads back exactly from it.
_TIMESTAMPTZ_FORM = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]{1,6})?)?"
                               r"(?:Z|[+-][0-9]{2}:[0-9]{2})")
_DATE_FORM = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_DECIMAL_FORM = re.compile(r"-?(?:0|[1-9][0-9]*)\.([0-9]+)")
_NON_FINITE = frozenset({"NaN", "Infinity", "-Infinity"})  # SqlSource's forms of non-finite floats
_INT64 = range(-(2**63), 2**63)


def _all_parse(values: list[str], form: re.Pattern[str], parse: Callable[[str], Any]) -> bool:
    """Every value in ``form`` and a real date/time (``2026-02-30`` is not)."""
    for v in values:
        if not form.fullmatch(v):
            return False
        try:
            parse(v[:-1] + "+00:00" if v.endswith("Z") else v)
        except ValueError:
            return False
    return True


def sql_type(values: list[Any], dialect: str, key: bool) -> Any:
    """A column type for auto.create / auto.evolve from the JSON values seen (the rule of the package
    docstring): booleans, integers, numbers, objects/arrays by their JSON type; strings that are all ISO
    8601 date-times with an offset, all dates, or all canonical decimals get that type; the rest is text.
    SQLite has no such types: decimals and date-times stay TEXT there (the exact string is kept), dates
    get ``DATE`` (the text form is what SQLite stores)."""
    import sqlalchemy as sa

    present = [v for v in values if v is not None]
    kinds = set(map(type, present))
    if kinds and kinds <= {bool}:
        return sa.Boolean()
    if kinds and kinds <= {int}:
        if dialect == "postgresql" and not all(v in _INT64 for v in present):
            return sa.Numeric()  # beyond BIGINT: exact
        return sa.BigInteger()
    if kinds and kinds <= {int, float, str} and float in kinds \
            and all(v in _NON_FINITE for v in present if type(v) is str):
        return sa.Double()
    if kinds and kinds <= {dict, list}:
        if dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import JSONB

            return JSONB()
        return sa.JSON()
    if kinds == {str}:
        if _all_parse(present, _DATE_FORM, date.fromisoformat):
            return sa.Date()
        if dialect != "sqlite":
            if _all_parse(present, _TIMESTAMPTZ_FORM, datetime.fromisoformat):
                return sa.DateTime(timezone=True)
            scales = [m.end() - m.start(1) if (m := _DECIMAL_FORM.fullmatch(v)) else -1 for v in present]
            if min(scales) >= 0:
                if dialect == "postgresql":
                    return sa.Numeric()  # unconstrained: each value keeps its digits and scale
                scale = max(scales)
                digits = max(len(v.lstrip("-")) - 1 for v in present)
                return sa.Numeric(precision=max(38, digits), scale=scale)
    return sa.String(255) if key else sa.Text()


def columns_of(rows: list[dict[str, Any]]) -> tuple[tuple[str, ...], list[list[Any]]] | None:
    """Rows that all have the same fields as ``(field names, columns)``, each column its values in row
    order; None when the rows differ in their fields (then each row is coerced on its own)."""
    cols = tuple(rows[0])
    if not cols or set(map(len, rows)) != {len(cols)}:
        return None
    try:  # the same number of fields and every one of cols in each row: the same fields
        return cols, [list(map(itemgetter(col), rows)) for col in cols]
    except KeyError:
        return None


def coerce_columns(shaped: tuple[tuple[str, ...], list[list[Any]]], coercers: Mapping[str, ColumnCoercer | None],
                   text_ok: bool) -> tuple[tuple[str, ...], list[Sequence[Any]]]:
    """The columns of :func:`columns_of` coerced a column at a time (rows are zipped from the columns only
    as they are written: no object kept per row)."""
    cols, columns = shaped
    out: list[Sequence[Any]] = []
    for col, values in zip(cols, columns, strict=True):
        conv = coercers.get(col)
        out.append(values if conv is None else conv(values, text_ok))
    return cols, out


def coerce_row(row: dict[str, Any], coerce: Mapping[str, Callable[[Any], Any] | None]) -> dict[str, Any]:
    """One row coerced field by field (the slow path; a ValueError names the field)."""
    out = dict(row)
    for k, v in row.items():
        c = coerce.get(k)
        if c is not None and v is not None:
            try:
                out[k] = c(v)
            except (ValueError, TypeError) as exc:
                raise ValueError(f"field {k!r}: {exc}") from None
    return out


_COPY_COLUMN = re.compile(r'\bcolumn "?([^":]+)"?: ')  # PostgreSQL's COPY context: "COPY t, line 1, column c: ..."
_QUOTED_COLUMN = re.compile(r'\bcolumn "([^"]+)"')
_INT_BITS = {"SmallInteger": 16, "BigInteger": 64, "Integer": 32}  # subclasses of Integer first


def bad_field(orig: BaseException, table: Table, row: Mapping[str, Any]) -> str | None:
    """The field of a row the database refused, when it can be told: the driver's diagnostics (PostgreSQL
    names the column of a NOT NULL or COPY failure, or in its message), else the first value that cannot
    fit its column's declared type (NULL into NOT NULL, text longer than its length, an integer out of
    range, an object or array into a column that is neither JSON nor text)."""
    import sqlalchemy as sa

    diag = getattr(orig, "diag", None)
    found: list[str | None] = [getattr(diag, "column_name", None)]
    for text in (getattr(diag, "context", None), str(orig)):
        m = text and (_COPY_COLUMN.search(text) or _QUOTED_COLUMN.search(text))
        found.append(m.group(1) if m else None)
    for name in found:
        if name and name in row:
            return name
    for k, v in row.items():
        col = table.c.get(k)
        if col is None:
            continue
        typ = col.type
        if v is None:
            if not col.nullable:
                return k
        elif isinstance(v, (dict, list)):
            if not isinstance(typ, (sa.JSON, sa.String, sa.ARRAY)):
                return k
        elif isinstance(typ, sa.String) and typ.length and isinstance(v, str) and len(v) > typ.length:
            return k
        elif isinstance(typ, sa.Integer) and isinstance(v, int):
            bits = next((b for name, b in _INT_BITS.items() if isinstance(typ, getattr(sa, name))), 64)
            if not -(2 ** (bits - 1)) <= v < 2 ** (bits - 1):
                return k
    return None


__all__ = ["ColumnCoercer", "bad_field", "coerce_columns", "coerce_row", "coercer", "column_coercer", "columns_of", "sql_type"]
