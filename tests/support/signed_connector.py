"""A test connector with a secret whose name looks harmless: ``signing.key`` (``Type.PASSWORD``).

``DataGenSource`` plus that one field; its task configs carry the key (as many connectors' do), so
the fan-out plan would hold it if the provider did not hide it.
"""

from __future__ import annotations

from collections.abc import Mapping

from connect_runtime.api.config import ConfigDef, Type
from connect_runtime.connectors.datagen import CONFIG, DataGenSource


class SignedDataGenSource(DataGenSource):
    """``DataGenSource`` with a ``signing.key`` password field."""

    def config_def(self) -> ConfigDef:
        return ConfigDef().define("signing.key", Type.PASSWORD, doc="HMAC key (a secret, harmless name).").merge(CONFIG)


class LeakySource(DataGenSource):
    """A source whose secrets hide inside other values: a database URL with a password in its user-info
    (``connection.url``, a plain STRING) and an options map with a ``secret`` entry (``storage.options``). Its
    ``start()`` fails with an error quoting the URL, the options and its PASSWORD field, as careless connectors do;
    the provider and the runtime must mask all three wherever the error goes."""

    def config_def(self) -> ConfigDef:
        return (ConfigDef()
                .define("connection.url", Type.STRING, doc="A database URL (user-info may hold a password).")
                .define("storage.options", Type.STRING, default="{}", doc="JSON options (may hold credentials).")
                .define("signing.key", Type.PASSWORD, doc="HMAC key (a secret, harmless name).")
                .merge(CONFIG))

    def start(self, props: Mapping[str, str]) -> None:
        raise RuntimeError(f"cannot connect to {props['connection.url']} with options {props['storage.options']} "
                           f"and key {props['signing.key']}")
