from __future__ import annotations

import pytest

from connect_runtime.api import (
    HIDDEN,
    ConfigDef,
    ConfigError,
    Password,
    Range,
    Type,
    ValidString,
    mask,
    valid_regex,
)


def make() -> ConfigDef:
    return (
        ConfigDef()
        .define("topic", Type.STRING, doc="Topic to write to.")
        .define("batch.size", Type.INT, default=500, validator=Range.at_least(1))
        .define("ratio", Type.DOUBLE, default=0.5, validator=Range.between(0, 1))
        .define("enabled", Type.BOOLEAN, default=True)
        .define("fields", Type.LIST, default=[])
        .define("mode", Type.STRING, default="poll", validator=ValidString.in_("poll", "interval"))
        .define("pattern", Type.STRING, default=None, validator=valid_regex)
        .define("secret", Type.PASSWORD, default=None)
        .define("klass", Type.CLASS, default="a.b.C")
    )


def test_parses_strings_to_types() -> None:
    v = make().parse({"topic": "t", "batch.size": "10", "ratio": "0.25", "enabled": "false",
                      "fields": "a, b,,c", "secret": "s3cret"})
    assert v["batch.size"] == 10 and v["ratio"] == 0.25 and v["enabled"] is False
    assert v["fields"] == ["a", "b", "c"]
    assert isinstance(v["secret"], Password) and v["secret"].value == "s3cret"
    assert str(v["secret"]) == HIDDEN and "s3cret" not in repr(v)


def test_typed_values_accepted() -> None:
    v = make().parse({"topic": "t", "batch.size": 3, "enabled": True, "fields": ["x"]})
    assert v["batch.size"] == 3 and v["enabled"] is True and v["fields"] == ["x"]


def test_one_error_names_every_bad_field() -> None:
    with pytest.raises(ConfigError) as info:
        make().parse({"batch.size": "zero", "ratio": "2", "enabled": "maybe", "mode": "sometimes",
                      "pattern": "(", "klass": "NoDots"})
    errors = info.value.errors
    assert set(errors) == {"topic", "batch.size", "ratio", "enabled", "mode", "pattern", "klass"}
    assert "missing required field" in errors["topic"]
    assert "an integer" in errors["batch.size"]
    assert "at most 1" in errors["ratio"]
    assert "boolean" in errors["enabled"]
    assert "poll, interval" in errors["mode"]
    assert "regular expression" in errors["pattern"]
    assert "dotted class path" in errors["klass"]
    msg = str(info.value)
    for name in errors:
        assert name in msg


def test_bool_is_not_an_int() -> None:
    with pytest.raises(ConfigError) as info:
        make().parse({"topic": "t", "batch.size": True})
    assert "batch.size" in info.value.errors


def test_define_twice_is_an_error() -> None:
    with pytest.raises(ConfigError, match="defined twice"):
        ConfigDef().define("a", Type.STRING).define("a", Type.INT)


def test_mask_hides_passwords_and_secret_looking_fields() -> None:
    cfg = {"topic": "t", "secret": "x", "sasl.password": "p", "sasl.jaas.config": "j",
           "ssl.key.password": "k", "api.token": "tok", "plain": Password("y"), "none.password": None}
    out = mask(cfg, make())
    assert out["topic"] == "t"
    for k in ("secret", "sasl.password", "sasl.jaas.config", "ssl.key.password", "api.token", "plain"):
        assert out[k] == HIDDEN, k
    assert out["none.password"] is None
    assert cfg["secret"] == "x"  # the input is not changed
    registry = mask({"basic.auth.user.info": "svc:pw", "value.converter.basic.auth.user.info": "svc:pw",
                     "schema.registry.url": "https://r"})  # the hook masks connection settings so
    assert registry == {"basic.auth.user.info": HIDDEN, "value.converter.basic.auth.user.info": HIDDEN,
                        "schema.registry.url": "https://r"}


def test_merge_keeps_both() -> None:
    merged = make().merge(ConfigDef().define("extra", Type.INT, default=1))
    assert {"topic", "extra"} <= set(merged.names())
