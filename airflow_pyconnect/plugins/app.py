"""The Connectors view's FastAPI app: a JSON API over :mod:`airflow_pyconnect.plugins.service` and the page.

Airflow mounts it at ``/pyconnect`` (the plugin's ``fastapi_apps``). A plugin app is **not** behind
Airflow's login on its own, so every API route resolves the user exactly as Airflow's own API does
(``airflow.api_fastapi.core_api.security.get_user``: the ``Authorization: Bearer`` token, else the UI's
``_token`` cookie) and asks Airflow's auth manager:

- reading (connectors, offsets, lag, runs): ``is_authorized_custom_view(GET, "Connectors")``
  (every role of the simple auth manager; a permission to grant with others);
- altering or resetting offsets: that **and** ``is_authorized_connection(PUT, <conn_id>)``: only a user
  Airflow lets edit the connection whose store holds the offsets (Op and Admin of the simple auth manager).

No token: 401; a token without the permission: 403. The offsets of a connector name no run registered in
the connection's store: 404 ``connector 'X' not found: ...`` for GET, PATCH and DELETE alike (Kafka
Connect's ``ConnectorsResource`` answers 404 "Connector X not found"; nothing is written under that name).
Changing offsets while a run holds the connector:
409 with the runtime's message. A store that cannot be reached: 503 with one line naming the
connection. The page itself (``GET /pyconnect/ui``, its charts ``/pyconnect/ui/charts.js``) is static HTML and
JavaScript with no data in it; it calls the API with the browser's cookie.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from airflow.api_fastapi.app import get_auth_manager
from airflow.api_fastapi.auth.managers.models.base_user import BaseUser
from airflow.api_fastapi.auth.managers.models.resource_details import ConnectionDetails
from airflow.api_fastapi.core_api.security import get_user
from fastapi import Body, Depends, FastAPI, HTTPException, Query, status
from fastapi.responses import HTMLResponse, Response

from airflow_pyconnect.plugins import service

VIEW_NAME = "Connectors"
"""The custom-view resource name the auth manager is asked about."""

PAGE = Path(__file__).resolve().parent / "static" / "connectors.html"
CHARTS = PAGE.with_name("charts.js")
"""The page's charts (SVG drawn in the browser), served at ``/pyconnect/ui/charts.js``: nothing from a CDN."""

UserDep = Annotated[BaseUser, Depends(get_user)]


def can_read(user: BaseUser) -> bool:
    return bool(get_auth_manager().is_authorized_custom_view(method="GET", resource_name=VIEW_NAME, user=user))


def can_edit(user: BaseUser, conn_id: str) -> bool:
    am = get_auth_manager()
    return can_read(user) and bool(am.is_authorized_connection(
        method="PUT", details=ConnectionDetails(conn_id=conn_id), user=user))


def _require_read(user: UserDep) -> BaseUser:
    if not can_read(user):
        raise HTTPException(status.HTTP_403_FORBIDDEN, f"Forbidden: reading the {VIEW_NAME} view")
    return user


ReaderDep = Annotated[BaseUser, Depends(_require_read)]


def _connection(conn_id: str) -> dict[str, Any]:
    for c in service.connection_ids():
        if c["conn_id"] == conn_id:
            return c
    raise HTTPException(status.HTTP_404_NOT_FOUND, f"no pyconnect connection {conn_id!r}")


def _unavailable(exc: service.StoreUnavailable) -> HTTPException:
    return HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, str(exc))


def create_app() -> FastAPI:
    """The app Airflow's API server mounts (see :class:`airflow_pyconnect.plugins.view.PyConnectPlugin`)."""
    app = FastAPI(title="PyConnect Connectors", description=__doc__, docs_url=None, redoc_url=None)

    @app.get("/ui", response_class=HTMLResponse, include_in_schema=False)
    def page() -> HTMLResponse:
        """The Connectors page (no data in it: it asks the API below)."""
        return HTMLResponse(PAGE.read_text(encoding="utf-8"), headers={"Cache-Control": "no-store"})

    @app.get("/ui/charts.js", include_in_schema=False)
    def charts() -> Response:
        """The page's chart drawing (static JavaScript, no data in it)."""
        return Response(CHARTS.read_text(encoding="utf-8"), media_type="text/javascript",
                        headers={"Cache-Control": "no-store"})

    @app.get("/api/connections")
    def connections(user: ReaderDep) -> dict[str, Any]:
        """The ``pyconnect`` connections and whether this user may change their offsets."""
        conns = service.connection_ids()
        return {"user": user.get_name(),
                "connections": [{**c, "can_edit": can_edit(user, c["conn_id"])} for c in conns]}

    @app.get("/api/connections/{conn_id}")
    def connectors(conn_id: str, user: ReaderDep) -> dict[str, Any]:
        """Connectors of the connection's store: offsets, topics, end offsets and lag."""
        conn = _connection(conn_id)
        try:
            out = service.overview(conn_id, conn["embedded"])
        except service.StoreUnavailable as exc:
            raise _unavailable(exc) from None
        out["can_edit"] = can_edit(user, conn_id)
        return out

    @app.get("/api/connections/{conn_id}/runs")
    def runs(conn_id: str, user: ReaderDep, connector: str | None = None,
             limit: Annotated[int, Query(ge=1, le=1000)] = 200) -> dict[str, Any]:
        """Every run, newest first: committed ranges of source runs and the registry's attempts (sink runs,
        failed, fenced or died attempts with the reason), each with its DAG run; one colour per connector."""
        conn = _connection(conn_id)
        try:
            return service.runs(conn_id, conn["embedded"], connector, limit)
        except service.StoreUnavailable as exc:
            raise _unavailable(exc) from None

    @app.get("/api/connections/{conn_id}/connectors/{name}/offsets")
    def get_offsets(conn_id: str, name: str, user: ReaderDep) -> dict[str, Any]:
        """KIP-875 ``GET /connectors/{name}/offsets``; 404 for a name with no run and no offsets stored."""
        from connect_runtime.admin import ConnectorNotFound

        conn = _connection(conn_id)
        try:
            return service.offsets(conn_id, name, conn["embedded"])
        except ConnectorNotFound as exc:
            raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from None
        except service.StoreUnavailable as exc:
            raise _unavailable(exc) from None

    def _change(conn_id: str, user: BaseUser) -> dict[str, Any]:
        conn = _connection(conn_id)
        if not can_edit(user, conn_id):
            raise HTTPException(status.HTTP_403_FORBIDDEN,
                                f"Forbidden: changing offsets needs edit access to connection {conn_id!r}")
        return conn

    def _run_change(fn: Any, *args: Any) -> dict[str, Any]:
        from connect_runtime.admin import ConnectorNotFound, OffsetsInDestination
        from connect_runtime.api.errors import ConfigError, ConnectorRunningError

        try:
            result: dict[str, Any] = fn(*args)
            return result
        except ConnectorNotFound as exc:  # Kafka Connect: 404 "Connector X not found"
            raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from None
        except ConnectorRunningError as exc:
            raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from None
        except OffsetsInDestination as exc:  # the page has no connector config (its secrets stay in the DAG)
            raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from None
        except ConfigError as exc:
            raise HTTPException(status.HTTP_400_BAD_REQUEST, str(exc)) from None
        except service.StoreUnavailable as exc:
            raise _unavailable(exc) from None

    @app.patch("/api/connections/{conn_id}/connectors/{name}/offsets")
    def alter_offsets(conn_id: str, name: str, user: UserDep,
                      offsets: Annotated[list[dict[str, Any]], Body(embed=True)]) -> dict[str, Any]:
        """KIP-875 alter: ``{"offsets": [{"partition": {...}, "offset": {...} | null}]}``; 409 while running."""
        conn = _change(conn_id, user)
        return _run_change(service.alter, conn_id, name, offsets, conn["embedded"])

    @app.delete("/api/connections/{conn_id}/connectors/{name}/offsets")
    def reset_offsets(conn_id: str, name: str, user: UserDep) -> dict[str, Any]:
        """KIP-875 reset: every offset of the connector deleted (a sink back to the start); 409 while running."""
        conn = _change(conn_id, user)
        return _run_change(service.reset, conn_id, name, conn["embedded"])

    return app


__all__ = ["VIEW_NAME", "can_edit", "can_read", "create_app"]
