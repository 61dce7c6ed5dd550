"""The provider's cluster policy: the schedule check for every task of every DAG Airflow parses.

Registered under Airflow's ``airflow.policy`` entry point (``pyproject.toml``), the documented way a package
adds cluster policies beside ``airflow_local_settings``. Airflow calls :func:`task_policy` for each task of a
DAG it parses (the DAG processor, ``airflow dags test``, a ``DagBag``), once the DAG file has run: so the check
sees tasks given their DAG after construction (``dag.add_task(op)``, ``op.dag = dag``) and mapped tasks
(``.partial(...).expand(...)``), which the operators' constructors cannot. A violation is the DAG file's import
error, naming the task, the schedule and the fix
(:func:`airflow_pyconnect.operators._base.check_task_schedule`).

Every Airflow process loads this module, so it imports only Airflow's hook marker; beside an Airflow the
provider cannot run on it checks nothing (:func:`airflow_pyconnect.unsupported_airflow`), and tasks of other
operators cost one class check.
"""

from __future__ import annotations

import functools
from typing import Any

from airflow.policies import hookimpl


@functools.cache
def _supported() -> bool:
    from airflow_pyconnect import unsupported_airflow

    return unsupported_airflow() is None


def _ours(task: Any) -> bool:
    kind = task.operator_class if getattr(task, "is_mapped", False) else type(task)
    return (isinstance(kind, type) and any(k.__module__.startswith("airflow_pyconnect.") for k in kind.__mro__)
            and _supported())


@hookimpl
def task_policy(task: Any) -> None:
    """Airflow's task policy: a pyconnect task whose templates use the data interval on a schedule whose runs
    have empty data intervals is refused (``AirflowClusterPolicyViolation``: the DAG file's import error)."""
    if not _ours(task):
        return
    from airflow.exceptions import AirflowClusterPolicyViolation

    from airflow_pyconnect.operators._base import check_task_schedule

    try:
        check_task_schedule(task)
    except ValueError as exc:
        raise AirflowClusterPolicyViolation(str(exc)) from exc


__all__ = ["task_policy"]
