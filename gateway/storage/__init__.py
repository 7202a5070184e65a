"""Storage: the engine (SQLite or PostgreSQL, with group commit and outage handling), the tables, the
stores per table family, schema migrations, retention and backups.

May import the kernel only. Everything that must survive a restart is written through here.
"""
