"""What the analyst wrote, in place of what a pass computed it to, in a refusal's message.

``rewriter.passes.current_time`` replaces ``CURRENT_DATE - 30`` by the date it stands for
(``CAST('2026-10-25' AS DATE)``), and a later refusal would quote that date, which the
analyst never wrote: the pass marks each replacement with the SQL it replaced, and
:func:`restore_written` puts that SQL back in the message and hint.
"""

from __future__ import annotations

from sqlglot import exp

from rewriter.errors import Rejected

#: ``exp.Expr.meta``: the SQL (PostgreSQL's spelling) of what the node replaced.
WRITTEN_TEXT = "dpproxy_written_text"


def marked(made: exp.Expr, written: exp.Expr) -> exp.Expr:
    """``made``, marked as standing for ``written``."""
    made.meta[WRITTEN_TEXT] = written.sql(dialect="postgres")
    return made


def written_texts(tree: exp.Expr) -> dict[str, str]:
    """The SQL of each marked node of ``tree`` -> the SQL it replaced."""
    found: dict[str, str] = {}
    for node in tree.walk():
        text = node.meta.get(WRITTEN_TEXT) if node._meta else None
        if isinstance(text, str):
            found[node.sql(dialect="postgres")] = text
    return found


def restore_written(rejection: Rejected, texts: dict[str, str]) -> Rejected:
    """``rejection`` quoting what was written where it quotes a marked node's SQL."""
    message, hint = rejection.message, rejection.hint
    for shown in sorted(texts, key=len, reverse=True):
        message = message.replace(shown, texts[shown])
        hint = None if hint is None else hint.replace(shown, texts[shown])
    if message == rejection.message and hint == rejection.hint:
        return rejection
    return Rejected(message, sqlstate=rejection.sqlstate, hint=hint)
