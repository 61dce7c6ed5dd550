"""Validate the connector configs of a DAG file without running anything (Kafka Connect's
``PUT /connector-plugins/{plugin}/config/validate``, for every pyconnect task of the file).

``python -m airflow_pyconnect.validate dags/my_dag.py [--date YYYY-MM-DD]`` (also ``pyconnect validate
dags/my_dag.py``, which runs this module) imports the file with Airflow's ``DagBag`` (as the DAG processor does:
the file's top-level code runs, no task does), finds every pyconnect operator's ``connector_config`` (mapped
tasks: their ``partial`` config) and checks each one with :func:`connect_runtime.validation.validate_config`, as
the runtime checks it before a run: every bad field is named, unknown keys are warnings.

Templated values (Jinja) are rendered for a **sample run**: ``--date`` (default: today, 00:00 UTC) as the
run's ``run_after``, its data interval from the DAG's timetable (``{{ ds }}``, ``{{ data_interval_start }}``,
``{{ params... }}``, ``{{ macros... }}`` work). A field whose value was rendered has its errors shown as
warnings (``depends on the run``): at run time it holds another value (e.g. ``{{ ds }}``'s folder, which may not
exist yet). A template that cannot render at parse time (``ti.xcom_pull``, ``var``, ``conn``) is skipped with a
note, and errors about that field are left out. Exit 1 when any task has an error (or the file does not import),
else 0. Secrets are masked in everything printed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

OPERATOR_MODULE = "airflow_pyconnect.operators."


@dataclass
class TaskReport:
    """What validation found for one task."""

    dag_id: str
    task_id: str
    connector_class: str = ""
    errors: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        head = f"{self.dag_id}.{self.task_id} ({self.connector_class.rpartition('.')[2] or '?'}): "
        head += "OK" if not self.errors else f"invalid: {len(self.errors)} field{'s' if len(self.errors) != 1 else ''}"
        return ([head] + [f"  {name}: {why}" for name, why in self.errors.items()]
                + [f"  warning: {w}" for w in self.warnings] + [f"  note: {n}" for n in self.notes])


def _is_pyconnect(task: Any) -> bool:
    """A task of one of our operators that runs a connector (a fan-out's merge task has no connector config)."""
    cls = getattr(task, "operator_class", None) or type(task)  # a mapped task names its operator class
    module = cls.get("_task_module", "") if isinstance(cls, Mapping) else getattr(cls, "__module__", "")
    partial = getattr(task, "partial_kwargs", None)
    has_config = hasattr(task, "connector_config") or (isinstance(partial, Mapping) and "connector_config" in partial)
    return str(module).startswith(OPERATOR_MODULE) and has_config


def _raw_config(task: Any) -> Any:
    partial = getattr(task, "partial_kwargs", None)
    if isinstance(partial, Mapping) and "connector_config" in partial:
        return partial["connector_config"]
    return getattr(task, "connector_config", None)


def sample_context(dag: Any, run_after: datetime) -> dict[str, Any]:
    """The template context of a sample run of ``dag`` at ``run_after`` (its data interval from the timetable)."""
    import pendulum
    from airflow.sdk.execution_time import macros

    after = pendulum.instance(run_after.astimezone(UTC))
    start, end = sample_interval(dag, after)
    logical = start
    params = {k: getattr(v, "value", v) for k, v in dict(getattr(dag, "params", None) or {}).items()}
    return {"dag": dag, "params": params, "macros": macros, "run_id": f"validate__{after.isoformat()}",
            "logical_date": logical, "ds": logical.strftime("%Y-%m-%d"), "ds_nodash": logical.strftime("%Y%m%d"),
            "ts": logical.isoformat(), "ts_nodash": logical.strftime("%Y%m%dT%H%M%S"),
            "data_interval_start": start, "data_interval_end": end, "run_after": after}


def sample_interval(dag: Any, after: Any) -> tuple[Any, Any]:
    """The data interval of the DAG's first scheduled run at or after ``after`` (a manual run's, for a DAG
    without a schedule), asked of the timetable as the scheduler has it (the SDK timetable through Airflow's
    serialization round trip, as the DAG processor stores it); ``[after, after]`` when that cannot be told."""
    import pendulum
    from airflow.serialization.decoders import decode_timetable
    from airflow.serialization.encoders import encode_timetable
    from airflow.timetables.base import TimeRestriction

    try:
        timetable = decode_timetable(encode_timetable(dag.timetable))
        info = None
        if getattr(timetable, "can_be_scheduled", True):
            info = timetable.next_dagrun_info(last_automated_data_interval=None,
                                              restriction=TimeRestriction(earliest=after, latest=None, catchup=True))
        interval = info.data_interval if info is not None else timetable.infer_manual_data_interval(run_after=after)
    except Exception:  # a custom timetable Airflow cannot convert here: the sample run has an empty interval
        return after, after
    if interval is None:
        return after, after
    return pendulum.instance(interval.start), pendulum.instance(interval.end)


def _render(task: Any, value: Any, context: Mapping[str, Any]) -> Any:
    env = task.get_template_env()
    return env.from_string(value).render(**{**context, "task": task})


def _templated(value: Any) -> bool:
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def check_task(task: Any, context: Mapping[str, Any]) -> TaskReport:
    """Render (sample run) and validate one pyconnect task's connector config."""
    from airflow_pyconnect._offsets import structured
    from connect_runtime.secrets import scrub, secret_values
    from connect_runtime.validation import validate_config

    report = TaskReport(task.dag_id, task.task_id)
    raw = _raw_config(task)
    if _templated(raw):
        try:
            raw = _render(task, raw, context)
        except Exception as exc:  # a template that needs the run (ti, var, conn): say so, check nothing
            report.notes.append(f"connector_config is a template that cannot render before a run ({exc}); not checked")
            return report
    try:
        config = structured(raw, "connector_config")
    except Exception as exc:  # not JSON nor a literal: that is this task's error
        report.errors["connector_config"] = str(exc)
        return report
    if not isinstance(config, Mapping):
        report.errors["connector_config"] = f"expected a mapping of config fields, got {type(config).__name__}"
        return report
    rendered: dict[str, Any] = {}
    skipped: set[str] = set()
    templated: set[str] = set()
    for key, value in config.items():
        if _templated(value):
            templated.add(str(key))
            try:
                value = _render(task, value, context)
            except Exception as exc:  # needs the run: left out, and said
                skipped.add(str(key))
                report.notes.append(f"{key}: template cannot render before a run ({exc}); not checked")
                continue
        rendered[str(key)] = value
    report.connector_class = str(rendered.get("connector.class") or "")
    secrets = [s for s in secret_values(rendered) if len(s) >= 3]
    result = validate_config(rendered)
    for name, why in result["errors"].items():
        if name in skipped:
            continue
        why = scrub(str(why), secrets)
        if name in templated:
            report.warnings.append(f"{name}: {why} (templated: depends on the run; checked for the sample run "
                                   f"{context['ds']})")
        else:
            report.errors[name] = why
    report.warnings += [scrub(str(w), secrets) for w in result["warnings"].values()]
    return report


def validate_dag_file(path: str, run_after: datetime | None = None) -> tuple[list[TaskReport], dict[str, str]]:
    """Every pyconnect task's report, and the file's import errors (``{file: error}``)."""
    import contextlib

    from airflow.dag_processing.dagbag import DagBag

    with contextlib.redirect_stdout(sys.stderr):  # Airflow's and the file's own output: not the report's
        bag = DagBag(dag_folder=path, safe_mode=False)
    when = run_after or datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    reports = []
    for dag_id in sorted(bag.dags):
        dag = bag.dags[dag_id]
        context = sample_context(dag, when)
        reports += [check_task(task, context) for task in dag.tasks if _is_pyconnect(task)]
    return reports, {str(k): str(v) for k, v in bag.import_errors.items()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pyconnect validate", description="Validate the connector configs of "
                                                                          "a DAG file without running it.")
    parser.add_argument("dag_file")
    parser.add_argument("--date", help="the sample run's run_after for templates (YYYY-MM-DD; default today, UTC)")
    args = parser.parse_args(argv)
    run_after = None
    if args.date:
        try:
            run_after = datetime.fromisoformat(args.date).replace(tzinfo=UTC)
        except ValueError:
            print(f"error: --date expects YYYY-MM-DD, got {args.date!r}", file=sys.stderr)
            return 2
    reports, import_errors = validate_dag_file(args.dag_file, run_after)
    for where, error in import_errors.items():
        print(f"error: {where} does not import: {error.strip().splitlines()[-1] if error.strip() else error}")
    if not reports and not import_errors:
        print(f"{args.dag_file}: no pyconnect task found")
    for report in reports:
        print("\n".join(report.lines()))
    bad = sum(1 for r in reports if r.errors)
    if reports:
        print(f"{len(reports)} task{'s' if len(reports) != 1 else ''} checked, "
              f"{bad} with errors" if bad else f"{len(reports)} task{'s' if len(reports) != 1 else ''} checked: OK")
    return 1 if bad or import_errors else 0


__all__ = ["TaskReport", "check_task", "main", "sample_context", "validate_dag_file"]


if __name__ == "__main__":
    sys.exit(main())
