"""confluent_kafka is imported only when a kafka:// URL is opened (checked in a fresh interpreter)."""

from __future__ import annotations

import subprocess
import sys


def test_confluent_kafka_is_imported_only_for_kafka_urls(tmp_path):
    code = (
        "import sys\n"
        "import connect_runtime, connect_runtime.backends, connect_runtime.runtime.source\n"
        "from connect_runtime.backends import open_backend\n"
        f"open_backend('sqlite:///{tmp_path / 'x.db'}').close()\n"
        "assert 'confluent_kafka' not in sys.modules, 'imported without a kafka URL'\n"
        "open_backend('kafka://127.0.0.1:9')\n"
        "assert 'confluent_kafka' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
