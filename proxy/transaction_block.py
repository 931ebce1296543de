"""Transaction blocks' modes, and transaction statements' errors, as PostgreSQL 15's.

The statements are read by proxy.transaction_statements; the session (proxy.session)
opens and ends the blocks. A transaction block (``TransactionBlock``, a Query's implicit
one too) has an isolation level, which BEGIN, SET TRANSACTION or SET
transaction_isolation may change before its first query and outside a savepoint, and
COMMIT AND CHAIN keeps (``checked_modes``, with PostgreSQL's errors). dpproxy's
transactions are always read only and never deferrable (transaction_read_only is on,
default_transaction_deferrable off). Asking a transaction for READ WRITE is taken, after
PostgreSQL's own checks, and changes nothing: clients ask for it out of habit (psycopg's
``read_only = False``), and no statement that writes reaches the database anyway.
DEFERRABLE, which only pg_dump asks for, is refused (0A000).
SET SESSION CHARACTERISTICS sets the session's default_transaction_* parameters, as SET
would.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from proxy.parameter_checks import checked_value
from proxy.pg_values import on_off, parse_bool
from proxy.seam import Notice, QueryError
from proxy.sqlstate import (
    ACTIVE_SQL_TRANSACTION,
    FEATURE_NOT_SUPPORTED,
    IN_FAILED_SQL_TRANSACTION,
    INVALID_PARAMETER_VALUE,
    NO_ACTIVE_SQL_TRANSACTION,
    UNDEFINED_OBJECT,
)
from proxy.transaction_statements import DEFERRABLE, ISOLATION, READ_ONLY, End, Mode

#: The parameters of the current transaction, which SET, RESET and SHOW read here.
TRANSACTION_PARAMETERS = frozenset({ISOLATION, READ_ONLY, DEFERRABLE})
#: What SET SESSION CHARACTERISTICS AS TRANSACTION sets for each mode.
SESSION_DEFAULTS = {
    ISOLATION: "default_transaction_isolation",
    READ_ONLY: "default_transaction_read_only",
    DEFERRABLE: "default_transaction_deferrable",
}
#: RESET's values (PostgreSQL's boot values; dpproxy's transactions are read only).
_RESET_VALUES = {ISOLATION: "read committed", READ_ONLY: "on", DEFERRABLE: "off"}
_SNAPSHOT_ISOLATIONS = frozenset({"serializable", "repeatable read"})


@dataclass
class TransactionBlock:
    """The transaction block in progress (explicit, or a Query's implicit one)."""

    isolation: str
    queried: bool = False  # a query ran in it (PostgreSQL's first snapshot): modes are set
    # The access mode asked for (PostgreSQL's XactReadOnly), which its checks of READ
    # WRITE read. The block is read only whatever it asked for (SHOW says so).
    read_only: bool = True


def session_defaults(parameters: Mapping[str, str]) -> TransactionBlock:
    """A block as the session's default_transaction_* parameters begin it."""
    return TransactionBlock(
        parameters["default_transaction_isolation"],
        read_only=parameters["default_transaction_read_only"] == "on",
    )


def shown_values(block: TransactionBlock | None, parameters: Mapping[str, str]) -> dict[str, str]:
    """What SHOW gives for TRANSACTION_PARAMETERS: the block's modes, or outside a block
    those each statement's own transaction begins with (the session's defaults)."""
    isolation = parameters["default_transaction_isolation"] if block is None else block.isolation
    return {ISOLATION: isolation, READ_ONLY: "on", DEFERRABLE: "off"}


def checked_modes(
    block: TransactionBlock, modes: tuple[Mode, ...], *, nested: bool
) -> TransactionBlock:
    """``block``'s modes once ``modes`` are set, in order, as PostgreSQL's checks allow
    (``nested``: in a savepoint); ``block`` itself is left as it is. Raises QueryError:
    25001 for a mode set after the block's first query or in a savepoint, 0A000 for
    DEFERRABLE."""
    isolation, read_only = block.isolation, block.read_only
    for name, value in modes:
        if name == ISOLATION:
            if value != isolation:  # as PostgreSQL, setting the same level is no change
                if block.queried:
                    raise _active("SET TRANSACTION ISOLATION LEVEL must be called before any query")
                if nested:
                    raise _active(
                        "SET TRANSACTION ISOLATION LEVEL must not be called in a subtransaction"
                    )
                isolation = value
        elif name == READ_ONLY:
            # As PostgreSQL's check_transaction_read_only: only a move from read only to
            # read write is checked. Taken, and the transaction stays read only (see the
            # module's docstring).
            if value == "off" and read_only:
                if nested:
                    raise _active(
                        "cannot set transaction read-write mode inside a read-only transaction"
                    )
                if block.queried:
                    raise _active("transaction read-write mode must be set before any query")
            read_only = value == "on"
        else:
            if nested:
                raise _active(
                    "SET TRANSACTION [NOT] DEFERRABLE cannot be called within a subtransaction"
                )
            if block.queried:
                raise _active("SET TRANSACTION [NOT] DEFERRABLE must be called before any query")
            if value == "on":
                raise QueryError(
                    FEATURE_NOT_SUPPORTED,
                    "dpproxy does not support DEFERRABLE transactions: dpproxy's transactions "
                    "are not deferrable",
                    hint="leave DEFERRABLE out (NOT DEFERRABLE is what they are)",
                )
    return replace(block, isolation=isolation, read_only=read_only)


def set_modes(
    block: TransactionBlock | None,
    defaults: TransactionBlock,
    modes: tuple[Mode, ...],
    *,
    nested: bool,
    statement: str | None = None,
    already: bool = False,
) -> tuple[Notice, ...]:
    """Set ``modes`` on ``block`` (checked_modes); the warnings PostgreSQL gives. Outside
    a block (``block`` None) they are checked on the statement's own transaction (with
    the session's ``defaults``) and end with it, with a warning that ``statement`` (if given)
    can only be used in transaction blocks; ``already``: BEGIN's warning in a block.
    Raises checked_modes' QueryError, with these warnings."""
    warnings: tuple[Notice, ...] = ()
    if already:
        warnings = (_warning("there is already a transaction in progress", ACTIVE_SQL_TRANSACTION),)
    if block is None:
        block = replace(defaults)
        warnings = () if statement is None else (no_block_warning(statement),)
    try:
        checked = checked_modes(block, modes, nested=nested)
        block.isolation, block.read_only = checked.isolation, checked.read_only
    except QueryError as error:
        error.notices = warnings + error.notices
        raise
    return warnings


def end_refusal(end: End, *, in_block: bool, implicit: bool, failed: bool) -> QueryError | None:
    """The error of COMMIT/ROLLBACK PREPARED (dpproxy has no prepared transactions), or of
    AND CHAIN outside a block or in a Query's implicit one, as PostgreSQL's; else None."""
    if end.prepared is not None:
        if failed:  # not one of the statements a failed block takes
            return aborted()
        if in_block:
            return _active(f"{end.name} PREPARED cannot run inside a transaction block")
        return QueryError(
            UNDEFINED_OBJECT,
            f'prepared transaction with identifier "{end.prepared}" does not exist',
        )
    if end.chain and (not in_block or implicit):
        return QueryError(
            NO_ACTIVE_SQL_TRANSACTION,
            f"{end.name} AND CHAIN can only be used in transaction blocks",
        )
    return None


def aborted() -> QueryError:
    """The error of a statement in a failed transaction block (but ROLLBACK and COMMIT)."""
    return QueryError(
        IN_FAILED_SQL_TRANSACTION,
        "current transaction is aborted, commands ignored until end of transaction block",
        hint="send ROLLBACK",
    )


def no_block_warning(statement: str) -> Notice:
    message = f"{statement} can only be used in transaction blocks"
    return _warning(message, NO_ACTIVE_SQL_TRANSACTION)


def _warning(message: str, code: str) -> Notice:
    return Notice(message=message, severity="WARNING", code=code)


def parameter_mode(name: str, value: str | None, parameters: Mapping[str, str]) -> Mode:
    """SET ``name`` = ``value`` (None: DEFAULT, or RESET) of one of TRANSACTION_PARAMETERS,
    as the mode it sets, the value checked as PostgreSQL checks it (22023)."""
    if value is None:
        return name, _RESET_VALUES[name]
    if name == ISOLATION:
        return name, checked_value(name, value, parameters, parameters)
    flag = parse_bool(value.strip())
    if flag is None:
        raise QueryError(
            INVALID_PARAMETER_VALUE,
            f'parameter "{name}" requires a Boolean value',
            hint=f"use SET {name} = on or off",
        )
    return name, on_off(flag)


def check_startup_mode(name: str, value: str, parameters: Mapping[str, str]) -> None:
    """A transaction_* parameter of the startup packet: checked as PostgreSQL sets it,
    after its startup transaction's first query (another isolation level, or any
    deferrable setting, is 25001; it ends the connection), and then of no effect.

    PostgreSQL's startup transaction begins read write (the server's own default, before
    the client's settings apply), so ``-c transaction_read_only=off``, which clients and
    poolers send out of habit, is taken there: here too, and the session's transactions
    stay read only (see the module's docstring)."""
    started = replace(session_defaults(parameters), queried=True, read_only=False)
    checked_modes(started, (parameter_mode(name, value, parameters),), nested=False)


def snapshot_error(
    block: TransactionBlock | None, defaults: TransactionBlock, snapshot: str, *, nested: bool
) -> QueryError:
    """SET TRANSACTION SNAPSHOT's error (``block`` None: outside a block, with a warning):
    dpproxy exports no snapshots, so, after PostgreSQL's checks, the snapshot is not
    found, as in PostgreSQL for an unknown one."""
    error = _snapshot_error(block or defaults, snapshot, nested)
    if block is None:
        error.notices = (no_block_warning("SET TRANSACTION"),)
    return error


def _snapshot_error(block: TransactionBlock, snapshot: str, nested: bool) -> QueryError:
    if block.queried or nested:
        return _active("SET TRANSACTION SNAPSHOT must be called before any query")
    if block.isolation not in _SNAPSHOT_ISOLATIONS:
        return QueryError(
            FEATURE_NOT_SUPPORTED,
            "a snapshot-importing transaction must have isolation level SERIALIZABLE or "
            "REPEATABLE READ",
        )
    return QueryError(INVALID_PARAMETER_VALUE, f'invalid snapshot identifier: "{snapshot}"')


def _active(message: str) -> QueryError:
    return QueryError(ACTIVE_SQL_TRANSACTION, message)
