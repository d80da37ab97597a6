"""The interactive API documentation at ``/docs``, served with no network access.

FastAPI's own ``/docs`` page loads Swagger UI from a CDN, so it is blank on a machine offline.
Here the page loads the Swagger UI files that the ``swagger-ui-bundle-v2`` package installs,
served by the application itself under ``/docs/assets``.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from swagger_ui_bundle import swagger_ui_path

DOCS_URL = "/docs"
ASSETS_URL = f"{DOCS_URL}/assets"
OAUTH2_REDIRECT_URL = f"{DOCS_URL}/oauth2-redirect"


def install_docs(app: FastAPI) -> None:
    """Serve Swagger UI for ``app``'s OpenAPI schema at ``/docs``, from local files (``app``
    is made with ``docs_url=None``)."""
    app.mount(ASSETS_URL, StaticFiles(directory=str(swagger_ui_path)), name="swagger-ui")

    @app.get(DOCS_URL, include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = str(request.scope.get("root_path", "")).rstrip("/")
        return get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} - API docs",
            oauth2_redirect_url=f"{root}{OAUTH2_REDIRECT_URL}",
            swagger_js_url=f"{root}{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_URL}/favicon-32x32.png",
        )

    @app.get(OAUTH2_REDIRECT_URL, include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()
