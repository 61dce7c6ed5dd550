"""Every example DAG of ``dags/`` has its system test module, ``pyconnect/test_<dag file>``, ending with
``test_run = get_test_run(dag)`` on that DAG (the providers' layout: one module per example)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.system.utils import DAGS

SYSTEM = Path(__file__).resolve().parent / "pyconnect"


def test_every_example_dag_has_a_system_test() -> None:
    examples = sorted(p.stem for p in DAGS.glob("*.py"))
    assert examples, f"no example DAG in {DAGS}"
    missing = []
    for name in examples:
        module = SYSTEM / f"test_{name}.py"
        if not module.exists():
            missing.append(f"{name}: no {module.relative_to(SYSTEM.parents[2])}")
            continue
        tree = ast.parse(module.read_text())
        loads = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "load_example"]
        last = tree.body[-1]
        if [ast.literal_eval(n.args[0]) for n in loads] != [name] or not (
                isinstance(last, ast.Assign) and [getattr(t, "id", "") for t in last.targets] == ["test_run"]
                and isinstance(last.value, ast.Call) and getattr(last.value.func, "id", "") == "get_test_run"):
            missing.append(f"{name}: {module.name} must load_example({name!r}) and end with test_run = get_test_run(dag)")
    assert not missing, "\n".join(missing)
