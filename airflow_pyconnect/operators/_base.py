"""What the source and sink operators share: config rendering, secret masking, the hook, errors."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any, NoReturn

from airflow.sdk import BaseOperator

from airflow_pyconnect._offsets import structured
from airflow_pyconnect.hooks.pyconnect import DEFAULT_CONN_ID, PyConnectHook, register_secrets

if TYPE_CHECKING:
    import jinja2
    from airflow.sdk import Context


def _check_bound(name: str, value: float | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0):
        raise ValueError(f"{name} must be a number >= 0 or None, got {value!r}")


class _ConnectorOperator(BaseOperator):
    """Base of the pyconnect operators (not for direct use)."""

    template_fields_renderers = {"connector_config": "json"}

    def __init__(
        self,
        *,
        connector_config: Mapping[str, Any] | str,
        pyconnect_conn_id: str = DEFAULT_CONN_ID,
        max_records: int | None = None,
        max_seconds: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if not isinstance(connector_config, (Mapping, str)):
            raise TypeError(f"connector_config must be a mapping (or a template rendering to one), "
                            f"got {type(connector_config).__name__}")
        if max_records is not None and (isinstance(max_records, bool) or not isinstance(max_records, int)):
            raise ValueError(f"max_records must be an int >= 0 or None, got {max_records!r}")
        _check_bound("max_records", max_records)
        _check_bound("max_seconds", max_seconds)
        self.connector_config = connector_config
        self.pyconnect_conn_id = pyconnect_conn_id
        self.max_records = max_records
        self.max_seconds = max_seconds

    @cached_property
    def hook(self) -> PyConnectHook:
        return PyConnectHook(self.pyconnect_conn_id)

    def render_template_fields(self, context: Context, jinja_env: jinja2.Environment | None = None) -> None:
        """Render, then register every secret of the rendered config with Airflow's secret masker
        (before the rendered fields are stored, so they show ``***`` in the UI)."""
        super().render_template_fields(context, jinja_env)
        try:
            config = self._config()
        except (TypeError, ValueError):
            return  # reported by execute()
        from connect_runtime.api.config import HIDDEN, mask

        register_secrets(*(config[k] for k, v in mask(config).items() if v == HIDDEN))

    def _config(self) -> dict[str, Any]:
        """The rendered connector config as a dict (a string is parsed as JSON or a Python literal)."""
        config = structured(self.connector_config, "connector_config")
        if not isinstance(config, Mapping):
            raise TypeError(f"connector_config must render to a mapping, got {type(config).__name__}")
        return {str(k): v for k, v in config.items()}

    def _masked(self, config: Mapping[str, Any]) -> dict[str, Any]:
        from connect_runtime.api.config import mask

        return mask(config)

    def _progress(self, kind: str, name: str):  # type: ignore[no-untyped-def]
        def progress(records: int, seconds: float) -> None:
            rate = records / seconds if seconds > 0 else 0.0
            self.log.info("%s connector %s: %d records after %.1f s (%.0f rec/s)", kind, name, records, seconds, rate)

        return progress

    def _fail(self, exc: BaseException, what: str) -> NoReturn:
        """Turn a runtime error into an Airflow exception with the same message, chained.

        A config error fails without retries (no retry can fix it); anything else is an
        ``AirflowException`` that the task's ``retries`` may retry. A retry is safe: its producers
        fence this attempt's (a zombie of this attempt can no longer commit).
        """
        from airflow.sdk.exceptions import AirflowException, AirflowFailException

        from connect_runtime.api.errors import ConfigError

        self.log.error("%s failed: %s: %s", what, type(exc).__name__, exc)
        if isinstance(exc, ConfigError):
            raise AirflowFailException(str(exc)) from exc
        raise AirflowException(str(exc)) from exc
