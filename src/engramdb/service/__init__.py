"""The REST service: ``create_app`` builds the FastAPI application over an ``Engine``.

Modules: ``app`` (the factory), ``settings``, ``auth`` (who is calling), ``deps`` (the
scope a request works in), ``errors`` (the one table from error to HTTP status), ``limits``
(request size), ``idempotency`` (replayed answers), ``models`` (the request and response
bodies, shared with the client SDK) and ``routers`` (one module per area).
"""
