"""A test connector with a secret whose name looks harmless: ``signing.key`` (``Type.PASSWORD``).

``DataGenSource`` plus that one field; its task configs carry the key (as many connectors' do), so
the fan-out plan would hold it if the provider did not hide it.
"""

from __future__ import annotations

from connect_runtime.api.config import ConfigDef, Type
from connect_runtime.connectors.datagen import CONFIG, DataGenSource


class SignedDataGenSource(DataGenSource):
    """``DataGenSource`` with a ``signing.key`` password field."""

    def config_def(self) -> ConfigDef:
        return ConfigDef().define("signing.key", Type.PASSWORD, doc="HMAC key (a secret, harmless name).").merge(CONFIG)
