"""Run one source run in this process (what the subprocess tests start).

``python -m tests.support.source_run '{"config": {...}, "backend": "sqlite:///...", "kwargs": {...}}'``
prints the result's ``to_dict()`` as one JSON line and exits 0, or prints
``{"error": "<class>", "message": "..."}`` and exits 2.
"""

from __future__ import annotations

import json
import sys


def main(argv: list[str]) -> int:
    spec = json.loads(argv[1])
    from connect_runtime import ConnectError, run_source

    try:
        result = run_source(spec["config"], spec["backend"], **spec.get("kwargs", {}))
    except ConnectError as exc:
        print(json.dumps({"error": type(exc).__name__, "message": str(exc)}), flush=True)
        return 2
    print(json.dumps(result.to_dict()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
