"""What the source and sink operators share: config rendering, secret masking, the hook, errors.

Secrets by type: when a task renders its fields (before Airflow stores the Rendered Templates,
and in ``airflow tasks render``), the connector's ``ConfigDef`` is loaded from ``connector.class``
(and those of its converters, transforms and predicates), and the value of every ``Type.PASSWORD``
field, of every field whose name looks secret to the runtime or to Airflow
(``[core] sensitive_var_conn_names``), is registered with Airflow's secret masker. The rendered
config is then a :class:`MaskedConfig`: a dict whose text form shows those values as ``[hidden]``,
so the task log, the Rendered Templates view, ``airflow tasks render``, XCom and error messages never
show them. Parsing a DAG file loads no connector class.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any, NoReturn

from airflow.sdk import BaseOperator

from airflow_pyconnect._offsets import structured
from airflow_pyconnect.hooks.pyconnect import DEFAULT_CONN_ID, PyConnectHook, register_secrets
from airflow_pyconnect.plugins.links import ConnectorsLink

if TYPE_CHECKING:
    import jinja2
    from airflow.sdk import Context


def airflow_name_rule(name: str) -> bool:
    """Airflow's secret-name rule (``[core] sensitive_var_conn_names`` plus its defaults)."""
    try:
        from airflow.sdk._shared.secrets_masker import should_hide_value_for_key
    except ImportError:  # pragma: no cover - trimmed SDKs
        return False
    return bool(should_hide_value_for_key(name))


class MaskedConfig(dict):  # type: ignore[type-arg]
    """A rendered connector config: a plain dict to the runtime, ``[hidden]`` secrets in its text form
    (``str``/``repr``, what ``airflow tasks render`` and log lines print)."""

    def __init__(self, data: Mapping[str, Any], secret: set[str]) -> None:
        super().__init__(data)
        self.secret = frozenset(secret)

    def secret_values(self) -> list[str]:
        """The values of the secret fields, as text (to register with the masker, to scrub)."""
        return [str(self[k]) for k in sorted(self.secret) if self.get(k) not in (None, "")]

    def masked(self) -> dict[str, Any]:
        from connect_runtime.api.config import HIDDEN

        return {k: (HIDDEN if k in self.secret else v) for k, v in self.items()}

    def __repr__(self) -> str:
        return repr(self.masked())

    __str__ = __repr__

    def __deepcopy__(self, memo: dict[int, Any]) -> MaskedConfig:
        import copy

        return MaskedConfig(copy.deepcopy(dict(self), memo), set(self.secret))

    def __reduce__(self) -> Any:
        return (MaskedConfig, (dict(self), set(self.secret)))


def _check_bound(name: str, value: float | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0):
        raise ValueError(f"{name} must be a number >= 0 or None, got {value!r}")


class _ConnectorOperator(BaseOperator):
    """Base of the pyconnect operators (not for direct use)."""

    template_fields_renderers = {"connector_config": "json"}
    operator_extra_links = (ConnectorsLink(),)

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
        """Render, then register every secret of the rendered config (by the connector's ConfigDef
        types and by name) with Airflow's secret masker, before the rendered fields are stored or
        printed, and keep the config as a :class:`MaskedConfig`."""
        super().render_template_fields(context, jinja_env)
        try:
            self.connector_config = self._config()
        except (TypeError, ValueError):
            return  # reported by execute()

    def _config(self) -> MaskedConfig:
        """The rendered connector config (a string is parsed as JSON or a Python literal), its secret
        values registered with Airflow's masker."""
        if isinstance(self.connector_config, MaskedConfig):
            return self.connector_config
        config = structured(self.connector_config, "connector_config")
        if not isinstance(config, Mapping):
            raise TypeError(f"connector_config must render to a mapping, got {type(config).__name__}")
        from connect_runtime.secrets import secret_keys

        plain = {str(k): v for k, v in config.items()}
        masked = MaskedConfig(plain, secret_keys(plain, name_rule=airflow_name_rule))
        register_secrets(*masked.secret_values())
        return masked

    def _masked(self, config: Mapping[str, Any]) -> dict[str, Any]:
        if isinstance(config, MaskedConfig):
            return config.masked()
        from connect_runtime.secrets import mask_config

        return mask_config(config, name_rule=airflow_name_rule)

    # -- on_kill -------------------------------------------------------------------------------------
    @cached_property
    def _stop(self) -> threading.Event:
        return threading.Event()

    def on_kill(self) -> None:
        """Stop the running connector (Airflow calls this on SIGTERM, e.g. a task marked failed or a
        timeout): the runtime's stop event ends the run at its next check; nothing uncommitted is kept
        and a later attempt fences this one's producers anyway."""
        self.log.warning("%s: killed; stopping the connector run", self.task_id)
        self._stop.set()

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

        message = str(exc)
        config = self.connector_config if isinstance(self.connector_config, MaskedConfig) else None
        if config is not None:
            from connect_runtime.secrets import scrub

            message = scrub(message, config.secret_values())
        self.log.error("%s failed: %s: %s", what, type(exc).__name__, message)
        if isinstance(exc, ConfigError):
            raise AirflowFailException(message) from exc
        raise AirflowException(message) from exc
