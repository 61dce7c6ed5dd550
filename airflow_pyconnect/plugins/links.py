"""The operator extra link "Connectors": from a PyConnect task instance to its connector on the page.

Airflow 3 computes an extra link when the task instance finishes (with the rendered connector
config) and stores the URL in XCom under :attr:`ConnectorsLink.xcom_key`; the UI shows it on the
task instance. Importing this module is cheap: the operators import it when a DAG file is parsed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlparse

from airflow.sdk import BaseOperatorLink

if TYPE_CHECKING:
    from airflow.sdk import BaseOperator
    from airflow.sdk.types import TaskInstanceKey

URL_PREFIX = "/pyconnect"
"""Where the plugin's FastAPI app is mounted."""
PAGE_PATH = f"{URL_PREFIX}/ui"


def base_path() -> str:
    """The path part of ``[api] base_url`` (``""`` at the root), without a trailing slash."""
    from airflow.sdk.configuration import conf

    base = conf.get("api", "base_url", fallback="/") or "/"
    path = urlparse(base).path if base.startswith(("http://", "https://")) else base
    return path.rstrip("/")


def page_url(conn_id: str | None = None, connector: str | None = None) -> str:
    """The page's URL (``[api] base_url`` included, absolute when that is a full URL)."""
    from airflow.sdk.configuration import conf

    base = (conf.get("api", "base_url", fallback="") or "").rstrip("/")
    query = {k: v for k, v in (("conn", conn_id), ("connector", connector)) if v}
    root = base if base.startswith(("http://", "https://")) else base_path()
    return f"{root}{PAGE_PATH}" + (f"?{urlencode(query)}" if query else "")


class ConnectorsLink(BaseOperatorLink):
    """The connector of a PyConnect source or sink task on the Connectors page."""

    name = "Connectors"

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        config: Any = getattr(operator, "connector_config", None)
        connector = str(config.get("name") or "") if isinstance(config, Mapping) else ""
        return page_url(getattr(operator, "pyconnect_conn_id", None), connector or None)


__all__ = ["PAGE_PATH", "URL_PREFIX", "ConnectorsLink", "page_url"]
