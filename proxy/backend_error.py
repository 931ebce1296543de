"""BackendError, apart from ``proxy.backends`` (which imports the rewriter's catalog and
planner, sqlglot among them) so that the command line can catch it without those imports.
``proxy.backends`` exports it with the errors derived from it."""

from __future__ import annotations


class BackendError(Exception):
    """The database failed. Its text is for the audit log and server log, never the analyst."""
