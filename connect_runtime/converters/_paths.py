"""How the registry converters' mappings name where a value sits, for errors: ``the value``, ``field 'a'``,
``field 'a.b'``, ``field 'a.items[2].sku'``, ``field 'a.m['k']'``."""

from __future__ import annotations


def field_path(where: str, name: str) -> str:
    """``where`` one struct field deeper: ``field_path("the value", "a") == "field 'a'"``,
    ``field_path("field 'a'", "b") == "field 'a.b'"``."""
    if where.startswith("field '"):
        return f"field '{where[7:-1]}.{name}'"
    return f"field {name!r}"


def item_path(where: str, index: object) -> str:
    """``where``'s element ``index`` (a list position, or a map key's ``repr``): ``field 'a[2]'``,
    ``the value[2]``."""
    if where.startswith("field '"):
        return f"{where[:-1]}[{index}]'"
    return f"{where}[{index}]"


__all__ = ["field_path", "item_path"]
