"""dpproxy's PostgreSQL-facing side: wire protocol, sessions, backends, CLI."""

__version__ = "0.1.0"
