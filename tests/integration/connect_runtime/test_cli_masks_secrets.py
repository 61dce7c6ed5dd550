"""The CLI, run as a process, masks a URL's password in its output and its log lines."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support import REPO

PW = "s3cr3t-pw"


def test_the_cli_masks_a_url_password_in_its_output_and_log_lines(tmp_path: Path) -> None:
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"name": "leaky", "connector.class":
                                  "tests.support.signed_connector.LeakySource", "topic": "t",
                                  "signing.key": "sign-key-77", "connection.url": f"postgresql://svc:{PW}@db/o",
                                  "storage.options": '{"password": "opt-pw-9"}'}))
    for args in (["-v", "run", str(config)], ["-v", "validate", str(config)]):
        out = subprocess.run([sys.executable, "-m", "connect_runtime.cli", "--backend",
                              f"sqlite:///{tmp_path / 'pc.db'}", *args], capture_output=True, text=True, timeout=120,
                             cwd=REPO)
        shown = out.stdout + out.stderr
        assert "postgresql://svc:[hidden]@db/o" in shown, shown[-2000:]
        for secret in (PW, "sign-key-77", "opt-pw-9"):
            assert secret not in shown, f"{args}: {shown[-2000:]}"
