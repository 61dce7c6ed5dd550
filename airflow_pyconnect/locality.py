"""Refuse, before any record moves, a run whose store or paths other workers cannot see (issue 33).

Under a single-machine executor (``LocalExecutor``, ``SequentialExecutor``, ``DebugExecutor``) every attempt and
every mapped task run on this machine: nothing to check. Under any other executor (Celery, Kubernetes, Edge, a
custom one; a task's own ``executor=`` wins over ``[core] executor``'s default) the next attempt, or the other
tasks of a fan-out, may run on another machine: the embedded SQLite store, and a connector's local paths not on a
shared filesystem, fail the task at once with one error naming each path, its filesystem, the executor and the
fix (:mod:`connect_runtime.locality` decides). ``[pyconnect] workers_share_disk = True``
(``AIRFLOW__PYCONNECT__WORKERS_SHARE_DISK``) turns the check off where the user knows every worker sees the same
files (all workers on one machine).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_pyconnect.hooks.pyconnect import SINGLE_MACHINE_EXECUTORS, executor_class_name, executor_names

__all__ = ["check_paths", "task_executor"]


def task_executor(task_executor_name: str | None) -> str:
    """The executor a task runs under: its own ``executor=``, else the first of ``[core] executor``."""
    if task_executor_name:
        return executor_class_name(task_executor_name)
    names = executor_names()
    return names[0] if names else "LocalExecutor"


def check_paths(backend_url: str, config: Mapping[str, Any], task_executor_name: str | None) -> None:
    """Raise :class:`~connect_runtime.api.errors.ConfigError` naming every local path of this run that another
    worker could not use, when the executor may run tasks on several machines."""
    from airflow.sdk.configuration import conf

    from connect_runtime.api.errors import ConfigError
    from connect_runtime.locality import local_paths, problems, read_mounts

    executor = task_executor(task_executor_name)
    if executor in SINGLE_MACHINE_EXECUTORS or conf.getboolean("pyconnect", "workers_share_disk", fallback=False):
        return
    paths = local_paths(backend_url, config)
    if conf.getboolean("pyconnect", "allow_embedded_default", fallback=False):  # the user said the file is shared
        paths = [p for p in paths if not p.store]
    if not paths:
        return
    found = problems(paths, read_mounts())
    if found:
        name = config.get("name", "?")
        raise ConfigError(f"connector {name!r} runs under {executor}, which may run its attempts and tasks on "
                          f"several machines, and nothing was moved: " + "; ".join(found) + ". If every worker "
                          "runs on this one machine, set [pyconnect] workers_share_disk = True")
