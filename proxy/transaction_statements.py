"""Transaction statements read by PostgreSQL's grammar.

proxy.statements recognises BEGIN/START TRANSACTION, COMMIT/END, ROLLBACK/ABORT, SET
TRANSACTION and SET SESSION CHARACTERISTICS AS TRANSACTION; ``read_transaction_statement``
reads them again from their text, token by token (proxy.sql_tokens), as PostgreSQL's
parser does: the transaction modes (ISOLATION LEVEL ..., READ ONLY | READ WRITE, [NOT]
DEFERRABLE, separated by commas or spaces), AND [NO] CHAIN, COMMIT/ROLLBACK PREPARED and
SET TRANSACTION SNAPSHOT; anything else is a syntax error (42601). What they do is
proxy.transaction_block's.
"""

from __future__ import annotations

from dataclasses import dataclass

from proxy.pg_values import on_off
from proxy.sql_tokens import Token, TokenReader, sql_tokens

ISOLATION = "transaction_isolation"
READ_ONLY = "transaction_read_only"
DEFERRABLE = "transaction_deferrable"

#: A transaction mode: ISOLATION, READ_ONLY or DEFERRABLE, and its value as SHOW gives it.
Mode = tuple[str, str]


@dataclass(frozen=True)
class Begin:
    start: bool  # START TRANSACTION, else BEGIN: the command tag
    modes: tuple[Mode, ...]

    @property
    def tag(self) -> str:
        return "START TRANSACTION" if self.start else "BEGIN"


@dataclass(frozen=True)
class End:
    commit: bool  # COMMIT or END, else ROLLBACK or ABORT
    chain: bool = False  # AND CHAIN: a new block begins at once, with the same modes
    prepared: str | None = None  # COMMIT PREPARED 'id' or ROLLBACK PREPARED 'id'

    @property
    def name(self) -> str:
        return "COMMIT" if self.commit else "ROLLBACK"


@dataclass(frozen=True)
class SetModes:
    modes: tuple[Mode, ...]
    session: bool  # SET SESSION CHARACTERISTICS AS TRANSACTION, else SET TRANSACTION
    local: bool  # SET LOCAL


@dataclass(frozen=True)
class ImportSnapshot:
    snapshot: str  # SET TRANSACTION SNAPSHOT 'id'


TransactionStatement = Begin | End | SetModes | ImportSnapshot


def read_transaction_statement(sql: str) -> TransactionStatement:
    """The transaction statement ``sql`` (one proxy.statements recognised as BEGIN,
    COMMIT, ROLLBACK or SET TRANSACTION), read by PostgreSQL's grammar. Raises QueryError
    42601 for anything else."""
    tokens = sql_tokens(sql)
    while tokens and tokens[-1] == Token("symbol", ";"):
        tokens.pop()
    reader = _Reader(tokens)
    first = reader.word()
    if first in ("begin", "start"):
        if first == "start":
            reader.expect("transaction")
        elif not reader.take("work"):
            reader.take("transaction")
        return Begin(first == "start", _modes(reader, empty=True))
    if first in ("commit", "end", "rollback", "abort"):
        return _end(reader, first)
    if first == "set":
        return _set(reader)
    raise reader.error()


def _end(reader: _Reader, first: str) -> End:
    commit = first in ("commit", "end")
    if first in ("commit", "rollback") and reader.take("prepared"):
        prepared = reader.string()
        reader.finish()
        return End(commit, prepared=prepared)
    if not reader.take("work"):
        reader.take("transaction")
    chain = False
    if reader.take("and"):
        chain = not reader.take("no")
        reader.expect("chain")
    reader.finish()
    return End(commit, chain)


def _set(reader: _Reader) -> SetModes | ImportSnapshot:
    local = reader.take("local")
    if not local and reader.peek(1) != Token("word", "characteristics"):
        reader.take("session")  # SET SESSION TRANSACTION, SET SESSION SESSION CHARACTERISTICS
    if reader.take("session"):
        for word in ("characteristics", "as", "transaction"):
            reader.expect(word)
        return SetModes(_modes(reader, empty=False), session=True, local=local)
    reader.expect("transaction")
    if reader.take("snapshot"):
        snapshot = reader.string()
        reader.finish()
        return ImportSnapshot(snapshot)
    return SetModes(_modes(reader, empty=False), session=False, local=local)


_LEVELS = {
    "serializable": (),
    "repeatable": ("read",),
    "read": ("committed", "uncommitted"),
}


def _modes(reader: _Reader, *, empty: bool) -> tuple[Mode, ...]:
    """A list of transaction modes, separated by commas or spaces (none if ``empty``)."""
    modes: list[Mode] = []
    if empty and reader.done():
        return ()
    while True:
        modes.append(_mode(reader))
        if reader.done():
            return tuple(modes)
        reader.take_symbol(",")


def _mode(reader: _Reader) -> Mode:
    word = reader.word()
    if word == "isolation":
        reader.expect("level")
        level = reader.word()
        following = _LEVELS.get(level)
        if following is None:
            raise reader.error(back=1)
        if following:
            second = reader.word()
            if second not in following:
                raise reader.error(back=1)
            level = f"{level} {second}"
        return ISOLATION, level
    if word == "read":
        access = reader.word()
        if access not in ("only", "write"):
            raise reader.error(back=1)
        return READ_ONLY, on_off(access == "only")
    if word == "deferrable":
        return DEFERRABLE, "on"
    if word == "not":
        reader.expect("deferrable")
        return DEFERRABLE, "off"
    raise reader.error(back=1)


class _Reader(TokenReader):
    """A syntax error quotes a token by its text (a string constant without its quotes)."""

    def near(self, token: Token, position: int) -> str:
        return token.text
