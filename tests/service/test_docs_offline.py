"""``/docs`` works with no network: the page loads Swagger UI from the service itself."""

from __future__ import annotations

import re

import httpx
import pytest
from swagger_ui_bundle import swagger_ui_path

from engramdb.engine import Engine
from engramdb.service.app import create_app
from engramdb.service.settings import ServiceSettings
from tests.service.conftest import JWT_SECRET


@pytest.mark.parametrize("auth", ["local", "production"])
async def test_docs_page_and_every_file_it_loads_come_from_the_service(
    engine: Engine, auth: str
) -> None:
    settings = (
        ServiceSettings()
        if auth == "local"
        else ServiceSettings(auth="production", jwt_secret=JWT_SECRET)
    )
    app = create_app(settings, engine=engine)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://service"
    ) as client:
        page = await client.get("/docs")
        assert page.status_code == 200
        assert "SwaggerUIBundle" in page.text
        assert "://" not in page.text  # no CDN, no other host: everything is relative
        loaded = re.findall(r"""(?:href|src|url)\s*[:=]\s*['"]([^'"]+)['"]""", page.text)
        assert {"/openapi.json", "/docs/assets/swagger-ui-bundle.js"} <= set(loaded)
        assert "/docs/assets/swagger-ui.css" in loaded
        for url in loaded:
            answer = await client.get(url)
            assert answer.status_code == 200, url
            assert len(answer.content) > 100, url
        bundle = await client.get("/docs/assets/swagger-ui-bundle.js")
        assert bundle.headers["content-type"].startswith(
            ("application/javascript", "text/javascript")
        )
        schema = (await client.get("/openapi.json")).json()
        # Swagger UI renders OpenAPI 3.1 from version 5 on: the shipped files must be 5.x.
        assert schema["openapi"].startswith("3.1")
        assert re.search(r"swagger-ui-5\.\d+\.\d+", str(swagger_ui_path))
        assert (await client.get("/docs/oauth2-redirect")).status_code == 200
        assert (await client.get("/redoc")).status_code == 404  # it would need a CDN
