"""Alembic's environment for Herald: migrations run on a connection Herald hands over (never from a URL in
an ini file), inside the caller's transaction, so a failed upgrade leaves nothing half-done."""

from __future__ import annotations

from alembic import context

from gateway.storage.migrations import include_object
from gateway.storage.tables import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata, include_object=include_object,
                  render_as_batch=connection.dialect.name == "sqlite")
with context.begin_transaction():
    context.run_migrations()
