"""Alembic environment: the store hands its open connection in `config.attributes`."""

from __future__ import annotations

from alembic import context
from sqlalchemy import engine_from_config, pool

from advisor.store.schema import metadata

config = context.config
connection = config.attributes.get("connection")

if connection is not None:
    context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()
else:  # plain `alembic upgrade head` with sqlalchemy.url set in a config file
    engine = engine_from_config(
        config.get_section(config.config_ini_section) or {},
        prefix="sqlalchemy.",
        poolclass=pool.NullPool,
    )
    with engine.connect() as conn:
        context.configure(connection=conn, target_metadata=metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
