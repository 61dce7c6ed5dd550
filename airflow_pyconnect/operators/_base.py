"""What the source and sink operators share: config rendering, secret masking, the hook, errors.

Secrets by type: when a task renders its fields (before Airflow stores the Rendered Templates,
and in ``airflow tasks render``), the connector's ``ConfigDef`` is loaded from ``connector.class``
(and those of its converters, transforms and predicates), and the value of every ``Type.PASSWORD``
field, of every field whose name looks secret to the runtime or to Airflow
(``[core] sensitive_var_conn_names``), is registered with Airflow's secret masker. The rendered
config is then a :class:`MaskedConfig`: a dict whose text form shows those values as ``[hidden]``,
so the task log, the Rendered Templates view, ``airflow tasks render``, XCom and error messages never
show them. Parsing a DAG file loads no connector class.

Runs of one connector must not overlap
--------------------------------------
Every run of a connector is a *generation* that fences every older generation of the same identity
(docs/delivery.md). Airflow runs a task's data intervals at the same time in a
backfill (``airflow backfill create`` runs up to 10 DAG runs at once by default, whatever the DAG's
``max_active_runs``), a catch-up, or a manual run beside a scheduled one. So the operators ask Airflow
to serialise the runs of one connector task through its task concurrency, ``max_active_tis_per_dag=1``
(:func:`serialised_runs`): the sink always (a sink connector has one identity), the source when it has
no ``identity``. A later run then waits in state *scheduled* until the earlier one finished; the task
instance's page in the UI lists "Task Concurrency: The max task concurrency has been reached." under
*Dependencies Blocking Task From Getting Scheduled*, and the scheduler logs "Not executing ... since
the task concurrency for this task has been reached". ``execution_timeout`` does not count that wait
(it starts when the task runs); only the DAG's ``dagrun_timeout`` bounds it. An explicit
``max_active_tis_per_dag`` (argument or ``default_args``) wins. The limit is per task: one connector name used by
two tasks or DAGs is not serialised by it (give those tasks a pool of one slot).

Schedules with data intervals
-----------------------------
A task whose connector config or identity is rendered from the data interval (``data_interval_start``
/ ``data_interval_end``: :data:`~airflow_pyconnect.operators.source.INTERVAL_IDENTITY`, the SQL source's
``interval.start`` / ``interval.end``) needs runs whose data interval is not empty. Airflow 3's cron
presets and cron strings (``schedule="@daily"``) make a ``CronTriggerTimetable`` whose runs have
``data_interval_start == data_interval_end``; so do ``schedule=None``, ``"@once"`` and asset schedules.
Such a task fails when the DAG file is parsed (an import error naming the task, the schedule and the
fix: :func:`check_schedule`), and, if it gets a run with an empty interval anyway, when it runs. The parse-time
check runs in the operator's constructor when the DAG is known there, and for every task of every DAG Airflow
parses through the provider's cluster policy (:mod:`airflow_pyconnect.policy`): mapped tasks and tasks given
their DAG after construction included. It uses Airflow's public API only (:func:`empty_runs`) and raises,
rather than switching itself off, on a timetable of Airflow's it does not know.
"""

from __future__ import annotations

import functools
import os
import re
import threading
from collections.abc import Mapping
from datetime import UTC
from functools import cached_property
from typing import TYPE_CHECKING, Any, NoReturn

from airflow.sdk import BaseOperator

from airflow_pyconnect._offsets import structured
from airflow_pyconnect.hooks.pyconnect import DEFAULT_CONN_ID, PyConnectHook, register_secrets
from airflow_pyconnect.plugins.links import ConnectorsLink

if TYPE_CHECKING:
    import jinja2
    from airflow.sdk import Context


AIRFLOW_SENSITIVE_NAMES = frozenset({
    "access_key", "access_token", "api_key", "apikey", "auth_header", "authorization", "bearer",
    "connection_string", "dsn", "passphrase", "passwd", "password", "private_key", "proxy", "proxy_password",
    "proxies", "secret", "service_account", "service_key", "token", "keyfile_dict", "webhook_url",
})
"""Airflow's default sensitive names ("Masking sensitive data" in its docs; ``DEFAULT_SENSITIVE_FIELDS`` of
Airflow 3.3's secrets masker), to which ``[core] sensitive_var_conn_names`` adds."""


@functools.cache
def _sensitive_names() -> frozenset[str]:
    """The names Airflow's masker hides, read from its config once per process as Airflow reads them (empty when
    ``[core] hide_sensitive_var_conn_fields`` is off)."""
    from airflow.sdk.configuration import conf

    if not conf.getboolean("core", "hide_sensitive_var_conn_fields", fallback=True):
        return frozenset()
    extra = conf.get("core", "sensitive_var_conn_names", fallback="") or ""
    return AIRFLOW_SENSITIVE_NAMES | {n.strip().lower() for n in extra.split(",") if n.strip()}


def airflow_name_rule(name: str) -> bool:
    """Airflow's secret-name rule (its default names plus ``[core] sensitive_var_conn_names``), as its masker's
    ``should_hide_value_for_key`` applies it: a name whose lower-cased, ``_``-joined form contains one of them.
    Airflow exposes that function only from a private module (``airflow.sdk._shared``), so the rule is here."""
    normalized = re.sub(r"\W+", "_", name.strip().lower())
    return any(s in normalized for s in _sensitive_names())


class MaskedConfig(dict):  # type: ignore[type-arg]
    """A rendered connector config: a plain dict to the runtime, ``[hidden]`` secrets in its text form
    (``str``/``repr``, what ``airflow tasks render`` and log lines print): secret fields whole, and the
    secrets inside other values (a URL's password, secret entries of an options map)."""

    def __init__(self, data: Mapping[str, Any], secret: set[str] | frozenset[str]) -> None:
        super().__init__(data)
        self.secret = frozenset(secret)

    def secret_values(self) -> list[str]:
        """Every secret value, as text (to register with the masker, to scrub): the secret fields' values,
        URL passwords and options-map secrets inside the other fields."""
        from connect_runtime.secrets import secret_values

        whole = [str(self[k]) for k in sorted(self.secret) if self.get(k) not in (None, "")]
        inside = secret_values({k: v for k, v in self.items() if k not in self.secret}, {},
                               name_rule=airflow_name_rule)
        return list(dict.fromkeys(whole + inside))

    def masked(self) -> dict[str, Any]:
        from connect_runtime.api.config import HIDDEN
        from connect_runtime.secrets import mask_value

        return {k: (HIDDEN if k in self.secret else mask_value(v, name_rule=airflow_name_rule))
                for k, v in self.items()}

    def __repr__(self) -> str:
        return repr(self.masked())

    __str__ = __repr__

    def __deepcopy__(self, memo: dict[int, Any]) -> MaskedConfig:
        import copy

        return MaskedConfig(copy.deepcopy(dict(self), memo), set(self.secret))

    def __reduce__(self) -> Any:
        return (MaskedConfig, (dict(self), set(self.secret)))


INTERVAL_FIX = (
    'give the DAG a schedule with data intervals, e.g. schedule=CronDataIntervalTimetable("@daily", '
    'timezone="UTC") (from airflow.timetables.interval; each run covers the day before it runs) or '
    'CronTriggerTimetable("@daily", timezone="UTC", interval=timedelta(days=1)) (from airflow.timetables.trigger)')
"""The fix named by the schedule errors."""

_INTERVAL_REF = re.compile(r"data_interval_(?:start|end)")
_NO_LOGICAL_DATE = re.compile(r"'(data_interval_start|data_interval_end|logical_date|ds|ds_nodash|ts|ts_nodash|"
                              r"ts_nodash_with_tz|prev_data_interval_start_success|prev_data_interval_end_success)' "
                              r"is undefined")


def interval_fields(**fields: Any) -> list[str]:
    """The names of the given template fields (and of their keys, for a mapping) whose templates
    use the data interval (``data_interval_start`` / ``data_interval_end``)."""
    found = []
    for name, value in fields.items():
        if isinstance(value, str):
            if _INTERVAL_REF.search(value):
                found.append(name)
        elif isinstance(value, Mapping):
            found += [f"{name}[{k!r}]" for k, v in value.items() if isinstance(v, str) and _INTERVAL_REF.search(v)]
    return found


_EMPTY_INTERVALS: dict[int, tuple[Any, str | None]] = {}
"""Per timetable object (``id``, the object kept alive with it): what :func:`_empty_intervals` found."""

_SCHEDULED = "scheduled runs, catch-up and backfills"


def _empty_intervals(dag: Any) -> str | None:
    """Which runs of ``dag`` have an empty data interval (``data_interval_start == data_interval_end``), told
    from its timetable (:func:`empty_runs`); ``None`` when they have data intervals."""
    timetable = getattr(dag, "timetable", None)
    if timetable is None:
        return None
    cached = _EMPTY_INTERVALS.get(id(timetable))
    if cached is None or cached[0] is not timetable:
        cached = _EMPTY_INTERVALS[id(timetable)] = (timetable, empty_runs(timetable, dag.start_date))
    return cached[1]


def empty_runs(timetable: Any, start_date: Any = None) -> str | None:
    """Which runs a DAG with this timetable gets with an empty data interval (``"manual runs"``, ...), or
    ``None`` when its runs have data intervals, through Airflow's public API only: a timetable written on
    Airflow's ``Timetable`` base (``airflow.timetables``, custom timetables included) is asked, as the
    scheduler asks it (``next_dagrun_info``, ``infer_manual_data_interval``); a Task SDK timetable is told by
    its class and its ``interval``. A Task SDK timetable of Airflow's own that this provider does not know
    (a newer Airflow) is an error: the check never switches itself off. One the DAG's author wrote on the SDK
    base gives ``None`` here; the check when the task runs still sees the run's real interval."""
    from airflow.timetables.base import Timetable

    if isinstance(timetable, Timetable):
        return _ask_timetable(timetable, start_date)
    from airflow.sdk import (
        CronDataIntervalTimetable,
        CronTriggerTimetable,
        DeltaDataIntervalTimetable,
        DeltaTriggerTimetable,
        EventsTimetable,
        MultipleCronTriggerTimetable,
    )
    from airflow.sdk.definitions.timetables.assets import (
        AssetOrTimeSchedule,
        AssetTriggeredTimetable,
        PartitionedAtRuntime,
    )
    from airflow.sdk.definitions.timetables.simple import ContinuousTimetable, NullTimetable, OnceTimetable

    if isinstance(timetable, AssetOrTimeSchedule):  # its time-based runs decide (its base is asset-triggered)
        return empty_runs(timetable.timetable, start_date)
    if isinstance(timetable, (CronDataIntervalTimetable, DeltaDataIntervalTimetable, ContinuousTimetable)):
        return None  # a continuous run covers the time since the previous one
    if isinstance(timetable, (CronTriggerTimetable, DeltaTriggerTimetable)):  # CronPartitionTimetable too
        return None if timetable.interval else _SCHEDULED
    if isinstance(timetable, MultipleCronTriggerTimetable):
        return None if all(t.interval for t in timetable.timetables) else _SCHEDULED
    if isinstance(timetable, NullTimetable):
        return "manual runs"
    if isinstance(timetable, (AssetTriggeredTimetable, PartitionedAtRuntime)):
        return "asset-triggered and manual runs"
    if isinstance(timetable, (OnceTimetable, EventsTimetable)):
        return _SCHEDULED
    kind = type(timetable)
    if kind.__module__.split(".")[0] == "airflow":
        from airflow import __version__ as airflow_version

        from airflow_pyconnect import __version__

        raise RuntimeError(
            f"airflow-pyconnect {__version__} does not know Airflow {airflow_version}'s timetable "
            f"{kind.__module__}.{kind.__qualname__}, so it cannot tell whether its runs have data intervals "
            f"(a newer Airflow than it was built for): upgrade airflow-pyconnect, or schedule with a timetable "
            f"it knows, e.g. {INTERVAL_FIX.removeprefix('give the DAG a schedule with data intervals, e.g. ')}")
    return None


def _ask_timetable(timetable: Any, start_date: Any) -> str | None:
    """Ask a timetable on Airflow's public ``Timetable`` base for its first scheduled run (or, when it
    schedules nothing, a manual run's interval) from the DAG's start date."""
    from datetime import datetime

    from airflow.timetables.base import TimeRestriction
    from pendulum import instance

    start = instance(start_date or datetime(2026, 1, 1, tzinfo=UTC))
    info = None
    if timetable.can_be_scheduled:
        info = timetable.next_dagrun_info(last_automated_data_interval=None,
                                          restriction=TimeRestriction(earliest=start, latest=None, catchup=True))
    if info is not None:
        interval, runs = info.data_interval, _SCHEDULED
    else:
        interval, runs = timetable.infer_manual_data_interval(run_after=start), "manual runs"
    return runs if interval.start == interval.end else None


def _verb(fields: list[str]) -> str:
    return "uses" if len(fields) == 1 else "use"


def _schedule_text(dag: Any) -> str:
    if dag is None:
        return "schedule (unknown: the task has no DAG)"
    schedule = getattr(dag, "schedule", None)
    kind = type(getattr(dag, "timetable", None)).__name__
    text = repr(schedule) if isinstance(schedule, (str, type(None))) else type(schedule).__name__
    return f"schedule={text} ({kind})" if kind not in text else f"schedule={text}"


def _dag_of(task: Any) -> Any:
    """The task's DAG or ``None`` (an operator not yet assigned; a mapped operator holds it as an attribute)."""
    has_dag = getattr(task, "has_dag", None)
    return (task.dag if has_dag() else None) if has_dag is not None else getattr(task, "dag", None)


def check_schedule(task: Any, fields: list[str]) -> None:
    """Fail (when the DAG file is parsed) if ``fields`` use the data interval but the task's DAG gives
    its runs empty data intervals; the error names the task, the DAG's schedule and the fix."""
    dag = _dag_of(task)
    if not fields or dag is None:
        return
    runs = _empty_intervals(dag)
    if runs is None:
        return
    why = ("; Airflow 3's cron presets such as \"@daily\" and cron strings make a CronTriggerTimetable "
           "without interval") if "Trigger" in type(getattr(dag, "timetable", None)).__name__ else ""
    raise ValueError(
        f"Task {task.task_id!r} of DAG {dag.dag_id!r}: {', '.join(fields)} {_verb(fields)} the data interval "
        f"(data_interval_start / data_interval_end), but the DAG's {_schedule_text(dag)} gives its {runs} an "
        f"empty data interval (data_interval_start == data_interval_end{why}): an interval-mode source would "
        f"read nothing and INTERVAL_IDENTITY would name no interval. Fix: {INTERVAL_FIX}.")


def check_task_schedule(task: Any) -> None:
    """:func:`check_schedule` for any task of a parsed DAG (the provider's cluster policy,
    :mod:`airflow_pyconnect.policy`, calls it for every task): a pyconnect operator, or one mapped with
    ``.partial(...).expand(...)`` (the fields of ``partial`` and each literal value of ``expand``; values from
    XCom are known only when the task runs, where :meth:`_ConnectorOperator._check_interval` checks them).
    Other tasks are left alone."""
    if getattr(task, "is_mapped", False):
        kind = task.operator_class
        if not (isinstance(kind, type) and issubclass(kind, _ConnectorOperator)):
            return
        names = kind.interval_args
        given: list[dict[str, Any]] = [{n: v for n, v in task.partial_kwargs.items() if n in names}]
        expand = task.expand_input.value
        for kwargs in ([expand] if isinstance(expand, Mapping) else expand if isinstance(expand, list) else []):
            if isinstance(kwargs, Mapping):
                given += [{n: v} for n in names if isinstance(kwargs.get(n), list) for v in kwargs[n]]
                given += [{n: kwargs[n]} for n in names if isinstance(kwargs.get(n), (str, Mapping))]
        fields = list(dict.fromkeys(f for kwargs in given for f in interval_fields(**kwargs)))
    elif isinstance(task, _ConnectorOperator):
        fields = getattr(task, "_interval_fields", [])
    else:
        return
    check_schedule(task, fields)


def serialised_runs(kwargs: dict[str, Any], serialise: bool) -> dict[str, Any]:
    """``kwargs`` with ``max_active_tis_per_dag=1`` when ``serialise`` and neither the arguments nor
    ``default_args`` (the DAG's and the task's, merged by Airflow) set it: runs of the task wait for
    each other instead of fencing each other (see the module docstring)."""
    if serialise and "max_active_tis_per_dag" not in kwargs \
            and "max_active_tis_per_dag" not in (kwargs.get("default_args") or {}):
        kwargs = {**kwargs, "max_active_tis_per_dag": 1}
    return kwargs


def _check_bound(name: str, value: float | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0):
        raise ValueError(f"{name} must be a number >= 0 or None, got {value!r}")


class _ConnectorOperator(BaseOperator):
    """Base of the pyconnect operators (not for direct use)."""

    template_fields_renderers = {"connector_config": "json"}
    operator_extra_links = (ConnectorsLink(),)
    interval_args: tuple[str, ...] = ("connector_config",)
    """The arguments whose templates may use the data interval (the schedule check reads them)."""
    lineage_kind: str | None = None
    """``source`` or ``sink``: which side of the run is the backend's topics in its OpenLineage datasets; ``None``
    for a task that moves no records (a fan-out's plan)."""
    _lineage_result: Mapping[str, Any] | None = None
    """This attempt's XCom result, kept by ``execute`` for :meth:`get_openlineage_facets_on_complete`."""
    _lineage_schemas: Mapping[str, Any] | None = None
    """Per topic, the Connect value schema of this attempt's records (the run result's ``value_schemas``)."""

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
        try:
            super().render_template_fields(context, jinja_env)
        except Exception as exc:
            missing = _NO_LOGICAL_DATE.search(str(exc))
            if missing is None or context.get("logical_date") is not None:
                raise
            from airflow.sdk.exceptions import AirflowFailException

            dag_run = context.get("dag_run")
            raise AirflowFailException(
                f"Task {self.task_id!r}: its templates use {missing.group(1)!r}, but this run "
                f"({getattr(dag_run, 'run_id', '?')}) has no logical date, so no data interval and no ds "
                f"(a manual run triggered without a logical date, e.g. `airflow dags trigger {self.dag_id}` "
                f"or the UI's Trigger with the logical date left empty). Run the intervals you mean with "
                f"`airflow backfill create --dag-id {self.dag_id} --from-date ... --to-date ...` "
                f"(`--reprocess-behavior completed` to run finished ones again), or clear an interval's run "
                f"(`airflow tasks clear {self.dag_id} -s DATE -e DATE`). A trigger with `--logical-date` gets "
                f"the data interval before the moment it is triggered, not the one of its logical date."
            ) from exc
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

    @staticmethod
    def _note_host(context: Context) -> None:
        """Tell the runtime which worker runs this task instance, by the name Airflow knows it (the task instance's
        ``hostname``: ``[core] hostname_callable``): the registry records it with each attempt (the Connectors
        view's Runs). This task's own process, so its environment."""
        from connect_runtime.admin import HOSTNAME_ENV

        host = getattr(context.get("ti"), "hostname", None)
        if host:
            os.environ[HOSTNAME_ENV] = str(host)
        else:
            os.environ.pop(HOSTNAME_ENV, None)

    def _check_paths(self, config: Mapping[str, Any]) -> None:
        """Fail before anything moves when this run's store or paths are local to a worker and the task's executor
        may run its attempts elsewhere (:func:`airflow_pyconnect.locality.check_paths`)."""
        from airflow_pyconnect.locality import check_paths

        check_paths(self.hook.backend_config()[0], config, getattr(self, "executor", None))

    def _check_interval(self, context: Context, fields: list[str]) -> None:
        """Fail (no retry can help) when ``fields`` use the data interval and this run's is empty."""
        start, end = context.get("data_interval_start"), context.get("data_interval_end")
        if not fields or start is None or start != end:
            return
        from airflow.sdk.exceptions import AirflowFailException

        schedule = _schedule_text(self.dag if self.has_dag() else None)  # type: ignore[no-untyped-call]
        raise AirflowFailException(
            f"Task {self.task_id!r}: {', '.join(fields)} {_verb(fields)} the data interval, but this run's is "
            f"empty ({start.isoformat()} to {end.isoformat()}; the DAG's {schedule}): an interval-mode source "
            f"would read nothing and INTERVAL_IDENTITY would name no interval. Fix: {INTERVAL_FIX}.")

    # -- OpenLineage ---------------------------------------------------------------------------------
    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The task's ``OperatorLineage`` after a successful run (Airflow's OpenLineage listener calls it): the
        datasets it read and wrote, output statistics, schemas and the committed ranges
        (:mod:`airflow_pyconnect.lineage`, docs/lineage.md). Needs the ``lineage`` extra; imports it only here."""
        from airflow_pyconnect.lineage import operator_lineage

        if self.lineage_kind is None or self._lineage_result is None:
            return operator_lineage(None, {}, "", None)
        return operator_lineage(self.lineage_kind, self._config(), self.hook.backend_config()[0], self._lineage_result,
                                self._lineage_schemas)

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

    def _metrics(self) -> Any:
        """The run's metrics, through Airflow's ``Stats`` (:mod:`airflow_pyconnect.metrics`), tagged with this
        task's ``dag_id`` and ``task_id``. Progress lines need nothing here: the runtime logs them."""
        from airflow_pyconnect.metrics import StatsMetrics

        return StatsMetrics({"dag_id": self.dag_id, "task_id": self.task_id})

    def _fail(self, exc: BaseException, what: str) -> NoReturn:
        """Turn a runtime error into an Airflow exception with the same message, chained.

        A config error fails without retries (no retry can fix it); anything else is an
        ``AirflowException`` that the task's ``retries`` may retry. A retry is safe: its producers
        fence this attempt's (a zombie of this attempt can no longer commit).

        When the error or its chain quotes a secret (a connector's error holding its PASSWORD field, a
        URL with its password), the traceback is logged with the secrets masked and the raw error is not
        chained: Airflow prints a chained exception's text as it is.
        """
        import traceback

        from airflow.sdk.exceptions import AirflowException, AirflowFailException

        from connect_runtime.api.errors import ConfigError
        from connect_runtime.secrets import scrub

        if isinstance(exc, AirflowException):  # Airflow's own (a task timeout, a skip): as raised
            raise exc
        config = self.connector_config if isinstance(self.connector_config, MaskedConfig) else None
        secrets = config.secret_values() if config is not None else []
        message = scrub(str(exc), secrets)
        self.log.error("%s failed: %s: %s", what, type(exc).__name__, message)
        chain = "".join(traceback.format_exception(exc))
        cause: BaseException | None = exc
        if scrub(chain, secrets) != chain:
            self.log.error("%s: the error's traceback, secrets masked:\n%s", what, scrub(chain, secrets))
            cause = None
        failure = AirflowFailException if isinstance(exc, ConfigError) else AirflowException
        raise failure(message) from cause
