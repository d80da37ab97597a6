"""``engram admin``: the schema, the service login, tenants, users and API keys of a served
database, and development JWTs."""

from __future__ import annotations

import os
from collections.abc import Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from engramdb.cli import render
from engramdb.cli.app import JsonFlag, fail, run, run_unopened, settings_of
from engramdb.core.errors import UsageError

if TYPE_CHECKING:
    from engramdb.engine import Engine, ScopedMemory
    from engramdb.orchestrator.tenancy import Role, Tenant, User


class RoleChoice(StrEnum):
    """``--role`` values."""

    reader = "reader"
    writer = "writer"


RoleOption = Annotated[
    RoleChoice, typer.Option(help="reader (reads only) or writer (reads and writes).")
]


def _role(role: RoleChoice) -> Role:
    return "reader" if role is RoleChoice.reader else "writer"


def _show(ctx: typer.Context, data: Any, text: str) -> None:
    """``data`` as JSON with ``--json``, else ``text`` for people."""
    if ctx.obj.as_json:
        render.emit_json(data)
    else:
        render.out.print(text)


def _show_named(ctx: typer.Context, items: Sequence[Tenant | User], ids: list[str]) -> None:
    """Tenants or users: as JSON, or one line each (id, name, creation time)."""
    rows = [f"{i}\t{item.name}\t{item.created_at}" for i, item in zip(ids, items, strict=True)]
    _show(ctx, [item.model_dump(mode="json") for item in items], "\n".join(rows))


def register(app: typer.Typer) -> None:
    """Add ``admin tenant|user|key …`` to ``app``."""
    admin = typer.Typer(help="Schema, tenants, users and API keys.", no_args_is_help=True)
    tenant = typer.Typer(help="Tenants.", no_args_is_help=True)
    user = typer.Typer(help="Users of a tenant.", no_args_is_help=True)
    key = typer.Typer(help="API keys.", no_args_is_help=True)
    token = typer.Typer(help="JWTs for development.", no_args_is_help=True)
    admin.add_typer(token, name="token")
    admin.add_typer(tenant, name="tenant")
    admin.add_typer(user, name="user")
    admin.add_typer(key, name="key")
    app.add_typer(admin, name="admin")

    @admin.command("migrate")
    def migrate(ctx: typer.Context, as_json: JsonFlag = False) -> None:
        """Bring the database's schema up to date and name the migrations applied.

        Opening a database migrates it as well. Run this once as a user allowed to change the
        schema (on PostgreSQL: to create the vector extension, the roles and the tables), and
        services may then connect as logins that are not.
        """
        from engramdb.storage.registry import migrate_target

        settings = settings_of(ctx, as_json)
        applied = run_unopened(lambda: migrate_target(settings.target()))
        text = "\n".join(f"applied {name}" for name in applied) or "the schema is up to date"
        _show(ctx, {"applied": applied}, text)

    @admin.command("service-login")
    def service_login(
        ctx: typer.Context,
        login: str,
        password_env: Annotated[
            str | None,
            typer.Option(help="Set the password from this environment variable."),
        ] = None,
        as_json: JsonFlag = False,
    ) -> None:
        """Create the PostgreSQL login a service connects as: a member of engram_service and
        nothing else, so it reaches one tenant at a time whatever SQL it runs.

        Run it as a user allowed to create roles, after `admin migrate`; running it again
        checks the login. Without --password-env the login gets no password (for peer or
        certificate authentication, or ALTER ROLE … PASSWORD later).
        """
        settings = settings_of(ctx, as_json)

        async def work() -> bool:
            from engramdb.storage.registry import create_service_login

            password = None
            if password_env is not None:
                password = os.environ.get(password_env)
                if not password:
                    raise UsageError(f"the environment variable {password_env} is empty or unset")
            return await create_service_login(settings.target(), login, password)

        created = run_unopened(work)
        verb = "created" if created else "checked"
        text = f"{verb} the login {login}: a member of engram_service and nothing else"
        _show(ctx, {"login": login, "created": created}, text)

    @tenant.command("create")
    def tenant_create(
        ctx: typer.Context,
        tenant_id: str,
        name: Annotated[str, typer.Option(help="A display name.")] = "",
        as_json: JsonFlag = False,
    ) -> None:
        """Register a tenant."""

        async def work(engine: Engine, memory: ScopedMemory) -> None:
            made = await engine.tenancy.create_tenant(tenant_id, name)
            _show(
                ctx, made.model_dump(mode="json"), f"created tenant [bold]{made.tenant_id}[/bold]"
            )

        run(ctx, work, as_json)

    @tenant.command("list")
    def tenant_list(
        ctx: typer.Context,
        limit: Annotated[int, typer.Option("--limit", "-n", min=1, max=1000)] = 100,
        as_json: JsonFlag = False,
    ) -> None:
        """List tenants."""

        async def work(engine: Engine, memory: ScopedMemory) -> None:
            page = await engine.tenancy.list_tenants(limit=limit)
            _show_named(ctx, page.items, [t.tenant_id for t in page.items])

        run(ctx, work, as_json)

    @tenant.command("delete")
    def tenant_delete(
        ctx: typer.Context,
        tenant_id: str,
        yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation.")] = False,
        as_json: JsonFlag = False,
    ) -> None:
        """Delete a tenant and everything stored under it."""
        if not yes and not typer.confirm(f"delete tenant {tenant_id!r} and all its data?"):
            raise typer.Exit(1)

        async def work(engine: Engine, memory: ScopedMemory) -> None:
            removed = await engine.tenancy.delete_tenant(tenant_id)
            _show(
                ctx,
                {"tenant_id": tenant_id, "records_deleted": removed},
                f"deleted tenant [bold]{tenant_id}[/bold] ({removed} records)",
            )

        run(ctx, work, as_json)

    @user.command("create")
    def user_create(
        ctx: typer.Context,
        tenant_id: str,
        user_id: str,
        name: Annotated[str, typer.Option(help="A display name.")] = "",
        as_json: JsonFlag = False,
    ) -> None:
        """Register a user (a person or an agent identity) of a tenant."""

        async def work(engine: Engine, memory: ScopedMemory) -> None:
            made = await engine.tenancy.create_user(tenant_id, user_id, name)
            _show(
                ctx,
                {"tenant_id": tenant_id, **made.model_dump(mode="json")},
                f"created user [bold]{made.user_id}[/bold] of {tenant_id}",
            )

        run(ctx, work, as_json)

    @user.command("list")
    def user_list(
        ctx: typer.Context,
        tenant_id: str,
        limit: Annotated[int, typer.Option("--limit", "-n", min=1, max=1000)] = 100,
        as_json: JsonFlag = False,
    ) -> None:
        """List the registered users of a tenant."""

        async def work(engine: Engine, memory: ScopedMemory) -> None:
            page = await engine.tenancy.list_users(tenant_id, limit=limit)
            _show_named(ctx, page.items, [u.user_id for u in page.items])

        run(ctx, work, as_json)

    @user.command("delete")
    def user_delete(
        ctx: typer.Context,
        tenant_id: str,
        user_id: str,
        yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation.")] = False,
        as_json: JsonFlag = False,
    ) -> None:
        """Erase a user: every memory stored under them, their registration and their API
        keys, with their events in the log blanked."""
        if not yes and not typer.confirm(
            f"erase user {user_id!r} of tenant {tenant_id!r} and all their data?"
        ):
            raise typer.Exit(1)

        async def work(engine: Engine, memory: ScopedMemory) -> None:
            removed = await engine.tenancy.delete_user(tenant_id, user_id)
            _show(
                ctx,
                {"tenant_id": tenant_id, "user_id": user_id, "records_deleted": removed},
                f"erased user [bold]{user_id}[/bold] of {tenant_id} ({removed} records)",
            )

        run(ctx, work, as_json)

    @key.command("create")
    def key_create(
        ctx: typer.Context,
        tenant_id: str,
        user_id: Annotated[
            str | None, typer.Option("--user", help="Bind the key to this user.")
        ] = None,
        role: RoleOption = RoleChoice.writer,
        name: Annotated[str, typer.Option(help="What the key is for.")] = "",
        as_json: JsonFlag = False,
    ) -> None:
        """Issue an API key; it is printed once and only its hash is stored."""

        async def work(engine: Engine, memory: ScopedMemory) -> None:
            made, secret = await engine.tenancy.create_key(
                tenant_id, user_id=user_id, role=_role(role), name=name
            )
            _show(
                ctx,
                {"key_id": made.key_id, "api_key": secret, "role": made.role},
                f"key id  {made.key_id}\napi key {secret}\n(shown once)",
            )

        run(ctx, work, as_json)

    @key.command("revoke")
    def key_revoke(ctx: typer.Context, key_id: str, as_json: JsonFlag = False) -> None:
        """Revoke an API key by its id."""

        async def work(engine: Engine, memory: ScopedMemory) -> None:
            revoked = await engine.tenancy.revoke_key(key_id)
            _show(
                ctx,
                {"key_id": key_id, "revoked_at": str(revoked.revoked_at)},
                f"revoked key [bold]{key_id}[/bold]",
            )

        run(ctx, work, as_json)

    @key.command("list")
    def key_list(ctx: typer.Context, tenant_id: str, as_json: JsonFlag = False) -> None:
        """List the API keys of a tenant (ids, users, roles; never the keys)."""

        async def work(engine: Engine, memory: ScopedMemory) -> None:
            page = await engine.tenancy.list_keys(tenant_id, limit=1000)
            rows = [
                f"{k.key_id}\t{k.user_id or '*'}\t{k.role}\t"
                f"{'revoked' if k.revoked_at else 'live'}\t{k.name}"
                for k in page.items
            ]
            data = [k.model_dump(mode="json", exclude={"sha256"}) for k in page.items]
            _show(ctx, data, "\n".join(rows))

        run(ctx, work, as_json)

    @token.command("create")
    def token_create(
        tenant_id: str,
        user_id: Annotated[str | None, typer.Option("--user", help="The token's subject.")] = None,
        role: RoleOption = RoleChoice.writer,
        ttl: Annotated[int, typer.Option(min=1, help="Lifetime in seconds.")] = 3600,
        secret: Annotated[
            str | None, typer.Option(envvar="ENGRAM_JWT_SECRET", help="The HS256 secret.")
        ] = None,
        audience: Annotated[str | None, typer.Option(envvar="ENGRAM_JWT_AUDIENCE")] = None,
    ) -> None:
        """Print an HS256 JWT that `engram serve --auth production` accepts."""
        from engramdb.service.auth import issue_token

        try:
            if not secret:
                raise UsageError("the JWT secret is needed: --secret or ENGRAM_JWT_SECRET")
            print(
                issue_token(
                    secret, tenant_id, user=user_id, role=_role(role), ttl_s=ttl, audience=audience
                )
            )
        except UsageError as exc:
            raise fail(exc) from None
