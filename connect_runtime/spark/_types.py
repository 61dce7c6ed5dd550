"""Kafka Connect schemas as Spark types: :func:`spark_schema` (a struct schema's fields as the columns of a
``StructType``) and :func:`spark_type` (any schema), so a Spark job gets typed columns from the schema records carry
instead of restating them.

=====================================  =========================================================================
Connect                                Spark
=====================================  =========================================================================
``INT8`` / ``INT16`` / ``INT32``       ``ByteType`` / ``ShortType`` / ``IntegerType``
``INT64``                              ``LongType``
``FLOAT32`` / ``FLOAT64``              ``FloatType`` / ``DoubleType``
``BOOLEAN`` / ``STRING`` / ``BYTES``   ``BooleanType`` / ``StringType`` / ``BinaryType``
``ARRAY`` / ``MAP`` / ``STRUCT``       ``ArrayType`` / ``MapType`` / ``StructType`` (nested alike)
``Decimal`` (scale *s*)                ``DecimalType(p, s)``: *p* is the ``connect.decimal.precision`` parameter when
                                       present (Confluent's AvroData keeps an Avro decimal's precision there), else
                                       38; capped at 38, Spark's maximum (a value needing more digits fails the read,
                                       it is never rounded)
``Date``                               ``DateType``
``Timestamp``                          ``TimestampType`` (an instant, shown in the session's time zone)
``Time``                               ``IntegerType``, milliseconds since midnight (Connect's and Avro's
                                       ``time-millis`` wire value, what ``from_avro`` gives); ``time="time"`` gives
                                       ``TimeType()`` instead, which Spark 4.2 reads only with
                                       ``spark.sql.timeType.enabled=true`` (off by default)
optional                               nullable (a field, an array's elements, a map's values)
=====================================  =========================================================================

Spark file sources report every column nullable whatever the files say; the mapping keeps the schema's own word.
"""

from __future__ import annotations

from typing import Literal

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampType,
    TimeType,
)

from connect_runtime.api.data import Date, Decimal, Schema, SchemaType, Time, Timestamp
from connect_runtime.api.errors import DataError

PRECISION_PARAMETER = "connect.decimal.precision"
"""The schema parameter holding a decimal's precision (Confluent's AvroData name)."""
MAX_PRECISION = 38
"""Spark's largest decimal precision: the precision of a Decimal schema that does not state one, and the cap."""

TimeAs = Literal["millis", "time"]

_PRIMITIVES: dict[SchemaType, DataType] = {
    SchemaType.INT8: ByteType(),
    SchemaType.INT16: ShortType(),
    SchemaType.INT32: IntegerType(),
    SchemaType.INT64: LongType(),
    SchemaType.FLOAT32: FloatType(),
    SchemaType.FLOAT64: DoubleType(),
    SchemaType.BOOLEAN: BooleanType(),
    SchemaType.STRING: StringType(),
    SchemaType.BYTES: BinaryType(),
}


def decimal_type(scale: int, precision: int | None, where: str = "the value") -> DecimalType:
    """``DecimalType(min(precision or 38, 38), scale)``; a scale Spark cannot hold raises :class:`DataError`."""
    wanted = MAX_PRECISION if precision is None else precision
    if scale < 0 or scale > MAX_PRECISION or wanted < 1:
        raise DataError(f"{where}: a decimal of precision {wanted} and scale {scale} has no Spark type (Spark's "
                        f"decimals hold 0 <= scale <= precision <= {MAX_PRECISION})")
    return DecimalType(max(min(wanted, MAX_PRECISION), scale), scale)


def spark_type(schema: Schema, *, time: TimeAs = "millis", where: str = "the value") -> DataType:
    """The Spark type of values of ``schema`` (the module docstring has the table). ``where`` names the field in
    errors."""
    if schema.name == Decimal.LOGICAL_NAME:
        raw = (schema.parameters or {}).get(PRECISION_PARAMETER)
        try:
            precision = int(raw) if raw is not None else None
        except ValueError:
            raise DataError(f"{where}: the Decimal parameter {PRECISION_PARAMETER}={raw!r} is not an integer") from None
        return decimal_type(Decimal.scale(schema), precision, where)
    if schema.name == Date.LOGICAL_NAME:
        return DateType()
    if schema.name == Timestamp.LOGICAL_NAME:
        return TimestampType()
    if schema.name == Time.LOGICAL_NAME:
        return TimeType() if time == "time" else IntegerType()
    if schema.type is SchemaType.STRUCT:
        return StructType([StructField(f.name, spark_type(f.schema, time=time, where=f"{where}.{f.name}"),
                                       f.schema.optional) for f in schema.fields])
    if schema.type is SchemaType.ARRAY:
        assert schema.value_schema is not None  # Schema refuses an ARRAY without it
        return ArrayType(spark_type(schema.value_schema, time=time, where=f"{where}[]"), schema.value_schema.optional)
    if schema.type is SchemaType.MAP:
        assert schema.key_schema is not None and schema.value_schema is not None
        return MapType(spark_type(schema.key_schema, time=time, where=f"{where}.<key>"),
                       spark_type(schema.value_schema, time=time, where=f"{where}.<value>"),
                       schema.value_schema.optional)
    return _PRIMITIVES[schema.type]


def spark_schema(schema: Schema, *, time: TimeAs = "millis") -> StructType:
    """The columns of values of a ``STRUCT`` schema: one field per column, optional fields nullable.

    :raises DataError: for a schema that is not a struct (its values are not rows), or a type Spark cannot hold,
        naming the field.
    """
    if schema.type is not SchemaType.STRUCT:
        raise DataError(f"a value schema of type {schema.type.name} has no columns: only a STRUCT schema's fields "
                        "become columns")
    struct = spark_type(schema, time=time)
    assert isinstance(struct, StructType)
    return struct


__all__ = ["MAX_PRECISION", "PRECISION_PARAMETER", "TimeAs", "decimal_type", "spark_schema", "spark_type"]
