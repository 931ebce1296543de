"""One analyst's connection: session settings, transaction state, and query dispatch."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from types import MappingProxyType
from typing import NamedTuple

from accountant import AnalystBudget, Epsilon, InvalidAmount, Mechanism, Rho
from accountant.budget import delta_units, format_delta, parse_delta
from accountant.zcdp import laplace_rho_nano
from proxy.asker import Asker
from proxy.backends import STATEMENT_TIMEOUT, CancelToken
from proxy.client_values import clean_application_name
from proxy.copy_out import copy_result, forced_columns
from proxy.copy_statement import CopyTo, is_copy, read_copy
from proxy.cursor_statements import Declare, Fetch, read_cursor_statement
from proxy.cursors import Cursors
from proxy.parameter_checks import check_name, checked_value, refusal
from proxy.parameter_table import (
    DEFAULTS,
    READ_ONLY_PARAMETERS,
    REPORTED_PARAMETERS,
    SINGLE_VALUED,
    is_placeholder,
    known,
    spelling,
)
from proxy.parameter_type_rules import ColumnOids, catalog_column_oids
from proxy.pg_settings import MAX_CUSTOM_PARAMETERS, parameters_key, too_many_custom_parameters
from proxy.pg_values import on_off, parse_bool, time_seconds
from proxy.pipeline import Pipeline
from proxy.reporting import Report
from proxy.responders import (
    SHOW_ALL_COLUMNS,
    OwnedStatementCanceled,
    Responder,
    SessionContext,
    canceled,
    show_all,
)
from proxy.seam import ColumnDescription, Notice, QueryError, StatementResult, TransactionStatus
from proxy.set_statement import read_set
from proxy.several_statements import Statement
from proxy.sqlstate import (
    ACTIVE_SQL_TRANSACTION,
    CANT_CHANGE_RUNTIME_PARAM,
    FEATURE_NOT_SUPPORTED,
    INVALID_PARAMETER_VALUE,
    NO_ACTIVE_SQL_TRANSACTION,
    QUERY_CANCELED,
    SYNTAX_ERROR,
    UNDEFINED_OBJECT,
    WARNING,
)
from proxy.statements import (
    Kind,
    SessionStatement,
    SeveralStatements,
    StatementSyntaxError,
    recognize,
    strip_sql,
)
from proxy.transaction_block import (
    SESSION_DEFAULTS,
    TRANSACTION_PARAMETERS,
    TransactionBlock,
    aborted,
    check_startup_mode,
    end_refusal,
    parameter_mode,
    session_defaults,
    set_modes,
    shown_values,
    snapshot_error,
)
from proxy.transaction_statements import (
    Begin,
    End,
    ImportSnapshot,
    SetModes,
    TransactionStatement,
    read_transaction_statement,
)
from rewriter.bias import CHECK_SHARE

TEXT_OID = 25
EPSILON_PARAMETER = "dpproxy.epsilon"
BUDGET_PARAMETER = "dpproxy.budget"
MECHANISM_PARAMETER = "dpproxy.mechanism"
DELTA_PARAMETER = "dpproxy.delta"
#: A query's δ for partition selection defaults to this fraction of the analyst's δ: a
#: thousand such queries fit in the budget, and one tenth of the fraction would raise the
#: threshold only by about 2.3 noise scales (it grows with ln(1/δ)).
DEFAULT_DELTA_FRACTION = Decimal(1000)
REPORT_PARAMETER = "dpproxy.report"
REPORTS: tuple[Report, ...] = ("notice", "columns")
BIAS_CHECK_PARAMETER = "dpproxy.bias_check"


@dataclass(frozen=True)
class _Settings:
    """Everything SET and RESET change, as saved at BEGIN and at each SAVEPOINT."""

    epsilon: Epsilon
    mechanism: Mechanism
    delta: Decimal
    report: Report
    bias_check: bool
    parameters: Mapping[str, str]


class _Snapshot(NamedTuple):
    """The session's parameters as the responders see them, taken once per change."""

    parameters: Mapping[str, str]  # a read-only copy
    key: str  # pg_settings.parameters_key(parameters)


class _Savepoint(NamedTuple):
    name: str
    settings: _Settings  # restored by ROLLBACK TO
    kept: _Settings  # what COMMIT would have kept then


class AnalystSession:
    def __init__(
        self,
        pipeline: Pipeline,
        asker: Asker,
        application_name: str,
        *,
        database: str = "",
        responders: tuple[Responder, ...] = (),
    ) -> None:
        self._pipeline = pipeline
        self._asker = asker
        self._database = database
        self._responders = responders
        self._status = TransactionStatus.IDLE
        # Every parameter of proxy.parameter_table (PostgreSQL's planner and resource
        # ones are kept and shown, and otherwise ignored); custom ones (myapp.tenant) join
        # when first set. Changed only through _put_parameter and _restore, which drop the
        # snapshot.
        self._parameters = dict(DEFAULTS)
        self._parameters["application_name"] = clean_application_name(application_name)
        self._snapshot: _Snapshot | None = None
        self._epsilon: Epsilon = asker.budget.default_per_query
        self._mechanism: Mechanism = asker.budget.mechanism
        self._delta: Decimal = default_query_delta(asker.budget)
        self._report_mode: Report = "notice"
        self._bias_check = False
        self._token: CancelToken | None = None
        # In a transaction block: the settings at BEGIN (ROLLBACK restores them) and those
        # COMMIT keeps (changed by plain SET and RESET, not by SET LOCAL), as PostgreSQL does.
        self._begun: _Settings | None = None
        self._kept: _Settings | None = None
        self._savepoints: list[_Savepoint] = []
        self._block: TransactionBlock | None = None  # its modes; None when IDLE
        self._transactions_ended = 0
        # While a Query of several statements runs (begin_several … end_several): whether
        # they are in PostgreSQL's implicit transaction block, which a statement of the
        # Query begins when none is open (BEGIN makes it an explicit one; COMMIT and
        # ROLLBACK end it with a warning), and whether a cancel request came meanwhile.
        self._several = False
        self._implicit = False
        self._several_canceled = False
        # What RESET, SET ... TO DEFAULT and DISCARD ALL go back to: the settings the
        # session started with, startup parameters included (as in PostgreSQL).
        self._defaults = self._settings()
        self._cursors = Cursors()  # DECLARE's, with the rows of their answers
        self._parameter_columns: ColumnOids | None = None  # read at the first Parse

    @property
    def transaction_status(self) -> TransactionStatus:
        return self._status

    @property
    def transactions_ended(self) -> int:
        return self._transactions_ended

    def abort_transaction(self) -> None:
        """An error in a transaction block fails it. As PostgreSQL, which aborts the
        innermost (sub)transaction at once, the settings go back to what they were when it
        began (the innermost savepoint, else the block): ROLLBACK TO or ROLLBACK then
        changes nothing more, and the client is told of a reported value undone at this
        Query's ReadyForQuery (proxy.server)."""
        if self._status is not TransactionStatus.IN_TRANSACTION:
            return
        self._status = TransactionStatus.FAILED
        restored = self._savepoints[-1].settings if self._savepoints else self._begun
        if restored is not None:
            self._restore(restored)

    def reported_parameters(self) -> dict[str, str]:
        """The values of the parameters reported on change, under PostgreSQL's names (the
        startup packet may have set them)."""
        return {shown: self._parameters[name] for name, shown in REPORTED_PARAMETERS.items()}

    def cancel(self) -> None:
        if self._several:  # the statements of the Query not run yet are not run
            self._several_canceled = True
        token = self._token
        if token is not None:
            token.cancel()

    async def close(self) -> None:
        self.cancel()

    def begin_several(self) -> None:
        self._several = True
        self._several_canceled = False

    def end_several(self, *, failed: bool) -> None:
        """As PostgreSQL at the end of a Query of several statements: its implicit
        transaction block, if still open, commits (SET LOCAL values end) or, after an
        error, rolls back (the settings go back to those before it)."""
        self._several = self._several_canceled = False
        if self._implicit:
            self._end_block(commit=not failed and self._status is TransactionStatus.IN_TRANSACTION)

    async def execute(self, sql: str) -> StatementResult:
        try:
            if self._several:
                self._next_of_several()
            return await self._execute(sql)
        except QueryError:
            self.abort_transaction()
            raise

    def parameter_columns(self) -> ColumnOids:
        """The type of each column of the analyst's tables, which a prepared statement's
        undeclared parameter compared with it takes (proxy.parameter_types)."""
        if self._parameter_columns is None:
            self._parameter_columns = catalog_column_oids(self._pipeline.catalog)
        return self._parameter_columns

    async def describe(self, sql: str) -> tuple[ColumnDescription, ...] | None:
        try:
            if not strip_sql(sql):
                return None
            statement = self._recognize(sql)
            if statement is None:
                if is_copy(sql):  # COPY … TO STDOUT returns no rows: NoData, as in PostgreSQL
                    await self._read_copy(sql)
                    return None
                with self._statement() as token:
                    system = await self._system_answer(sql, token)
                    if system is not None:
                        return system.columns
                    columns = await self._pipeline.describe(
                        self._asker,
                        sql,
                        self._epsilon,
                        mechanism=self._mechanism,
                        report=self._report_mode,
                        delta=self._delta,
                        bias_check=self._bias_check,
                        time_zone=self._parameters["timezone"],
                    )
                    if token.canceled:  # while it was planned (nothing is ever charged)
                        await self._audit_canceled(sql, token)
                        raise canceled(token.reason)
                    return columns
        except QueryError:
            self.abort_transaction()
            raise
        if statement.kind is Kind.FETCH:  # (PostgreSQL: NoData for a cursor that is not)
            fetch = read_cursor_statement(sql)
            return self._cursors.columns(fetch.name) if isinstance(fetch, Fetch) else None
        if statement.kind is Kind.SHOW and statement.name == "all":
            return SHOW_ALL_COLUMNS
        if statement.kind is Kind.SHOW:  # headed by PostgreSQL's spelling: TimeZone
            return (ColumnDescription(spelling(statement.name or ""), TEXT_OID),)
        return None

    @contextlib.contextmanager
    def _statement(self) -> Iterator[CancelToken]:
        """The token of a statement that runs something (a catalog or DP query, at Query,
        Describe or Execute): fired by a cancel request (``cancel``) or, once the session's
        statement_timeout has passed (0: never), by a timer, as in PostgreSQL. The
        server's statement_timeout_seconds bounds the database's part on its own."""
        token = CancelToken()
        self._token = token
        seconds = time_seconds(self._parameters["statement_timeout"], "ms")
        timer = None
        if seconds > 0:
            loop = asyncio.get_running_loop()
            timer = loop.call_later(seconds, token.cancel, STATEMENT_TIMEOUT)
        try:
            yield token
        finally:
            if timer is not None:
                timer.cancel()
            self._token = None

    async def _system_answer(self, sql: str, token: CancelToken) -> StatementResult | None:
        """The answer of the first responder that owns ``sql``, else None. A cancel
        request (``token``) stops a responder's work with 57014, and a statement that no
        responder owns ends so too if ``token`` fired meanwhile: nothing has run and
        nothing is charged. Such a stop is audited (_audit_canceled) unless the statement
        is known to be a responder's (a catalog query stopped while it ran): stopped while
        it was classified, it may have been a DP query."""
        if not self._responders:
            return None
        snapshot = self._parameters_snapshot()
        context = SessionContext(
            asker=self._asker,
            database=self._database,
            parameters=snapshot.parameters,
            catalog=self._pipeline.catalog,
            ledger=self._pipeline.ledger,
            cancel=token,
            parameters_key=snapshot.key,
            cursors=self._cursors.listed(),  # (pg_cursors: this session's alone)
        )
        try:
            for responder in self._responders:
                answer = await responder.answer(sql, context)
                if answer is not None:
                    return answer
        except QueryError as error:
            owned = isinstance(error, OwnedStatementCanceled)
            if error.sqlstate == QUERY_CANCELED and token.canceled and not owned:
                await self._audit_canceled(sql, token)
            raise
        if token.canceled:
            await self._audit_canceled(sql, token)
            raise canceled(token.reason)
        return None

    async def _audit_canceled(self, sql: str, token: CancelToken) -> None:
        """Audit a statement that would have gone to the DP pipeline (or may have),
        stopped by ``token`` before it got there: as the pipeline audits a stop before the
        charge (Decision.ERROR; nothing is charged)."""
        await self._pipeline.audit_canceled(self._asker, sql, token.reason)

    def _parameters_snapshot(self) -> _Snapshot:
        """The parameters as the responders see them, with dpproxy's own as SHOW gives them
        (the catalog's current_setting('dpproxy.epsilon') and pg_settings): a read-only
        copy and its key, made again only after they changed (not per statement)."""
        own = {**self._dpproxy_settings(), **self._transaction_values()}
        snapshot = self._snapshot
        if snapshot is None or any(snapshot.parameters.get(k) != v for k, v in own.items()):
            parameters = {**self._parameters, **own}
            snapshot = _Snapshot(MappingProxyType(parameters), parameters_key(parameters))
            self._snapshot = snapshot
        return snapshot

    def _dpproxy_settings(self) -> dict[str, str]:
        """dpproxy's own settings as SHOW gives them (dpproxy.budget, read from the ledger
        when shown, is not one of them)."""
        return {
            EPSILON_PARAMETER: self._epsilon.plain,
            DELTA_PARAMETER: format_delta(self._delta),
            MECHANISM_PARAMETER: self._mechanism.value,
            REPORT_PARAMETER: self._report_mode,
            BIAS_CHECK_PARAMETER: on_off(self._bias_check),
        }

    def _transaction_values(self) -> dict[str, str]:
        """transaction_isolation, transaction_read_only and transaction_deferrable as SHOW
        gives them now (proxy.transaction_block)."""
        return shown_values(self._block, self._parameters)

    def _query_begins(self) -> None:
        """A query (not a session statement) runs: its block's modes are set from now."""
        if self._block is not None:
            self._block.queried = True

    def query_prepared(self) -> None:
        """The extended protocol's Parse or Bind of a query (proxy.extended): as in
        PostgreSQL, which takes the transaction's snapshot to analyse it, the block's
        modes are set from now. (A Describe of a prepared statement takes none.)"""
        self._query_begins()

    def _put_parameter(self, name: str, value: str) -> None:
        """Set a parameter; a custom one not defined yet only while the session has fewer
        than MAX_CUSTOM_PARAMETERS (54000 else, and nothing changes)."""
        if name not in self._parameters and is_placeholder(name):
            defined = sum(1 for known in self._parameters if is_placeholder(known))
            if defined >= MAX_CUSTOM_PARAMETERS:
                raise too_many_custom_parameters(name)
        self._parameters[name] = value
        self._snapshot = None

    def _recognize(self, sql: str) -> SessionStatement | None:
        try:
            statement = recognize(sql)
        except SeveralStatements as error:
            raise QueryError(
                FEATURE_NOT_SUPPORTED, str(error), hint="send one statement per query"
            ) from None
        except StatementSyntaxError as error:
            raise QueryError(SYNTAX_ERROR, str(error)) from None
        if self._status is TransactionStatus.FAILED and (
            statement is None
            or statement.kind not in (Kind.COMMIT, Kind.ROLLBACK, Kind.ROLLBACK_TO)
        ):
            raise aborted()
        return statement

    async def _execute(self, sql: str) -> StatementResult:
        if not strip_sql(sql):
            return StatementResult(tag="", empty=True)
        statement = self._recognize(sql)
        if statement is not None:
            if statement.kind in _CURSOR_KINDS:
                return await self._cursor_statement(sql)
            if statement.kind in _CONTROL_KINDS or statement.transaction:
                return self._control(read_transaction_statement(sql))
            if statement.kind is Kind.SET:
                statement = read_set(sql, statement, _KNOWN_PARAMETERS)
            if statement.kind is Kind.SHOW and statement.name == BUDGET_PARAMETER:
                return await self._show_budget()
            return self._session_statement(statement)
        if is_copy(sql):
            return await self._copy(sql)
        return await self._answer_query(sql)

    async def _answer_query(self, sql: str) -> StatementResult:
        """A query (not a session statement): a catalog answer, else the DP pipeline's."""
        self._query_begins()
        # One token for the whole statement: a cancel request or the statement_timeout
        # stops the catalog responder (classifying the statement, or running a catalog
        # query) as well as a DP query (not charged if it fires before the charge).
        with self._statement() as token:
            system = await self._system_answer(sql, token)
            if system is not None:
                return system
            return await self._pipeline.answer(
                self._asker,
                sql,
                self._epsilon,
                token,
                mechanism=self._mechanism,
                report=self._report_mode,
                delta=self._delta,
                bias_check=self._bias_check,
                time_zone=self._parameters["timezone"],
            )

    async def _cursor_statement(self, sql: str) -> StatementResult:
        """DECLARE, FETCH, MOVE and CLOSE (proxy.cursors)."""
        statement = read_cursor_statement(sql)
        if isinstance(statement, Declare):
            return await self._declare(statement)
        if isinstance(statement, Fetch):
            return self._cursors.fetch(statement)  # (as PostgreSQL's, takes no snapshot)
        self._query_begins()  # CLOSE takes one in PostgreSQL: SET TRANSACTION is late then
        return self._cursors.close(statement.name)

    async def _declare(self, declare: Declare) -> StatementResult:
        """DECLARE: its query answered exactly as the same query sent alone (a catalog
        answer, or planned, charged and audited by the pipeline), after every check that
        could refuse the cursor; its rows are kept in the session, and pg_cursors lists
        it (created when the DECLARE began). An error of the query that says where it is
        (line, column) says it in the DECLARE's text."""
        begun = datetime.now(UTC)  # PostgreSQL's creation_time: the statement's start
        in_block = self._status is TransactionStatus.IN_TRANSACTION
        self._cursors.check_declare(declare, in_block=in_block)
        try:
            answer = await self._answer_query(declare.query)
        except QueryError as error:
            raise Statement(declare.query, *declare.place).placed(error) from None
        depth = len(self._savepoints) if in_block else None
        return self._cursors.open(declare, answer, depth=depth, begun=begun)

    def cursor_columns(self, name: str) -> tuple[ColumnDescription, ...] | None:
        return self._cursors.columns(name)

    def _session_statement(self, statement: SessionStatement) -> StatementResult:
        if statement.kind is Kind.UNLISTEN:  # no LISTEN in dpproxy: nothing to stop
            return StatementResult(tag="UNLISTEN")
        if statement.kind in _CLEANUP_KINDS:
            return self._transaction_statement(statement)
        if statement.kind is Kind.SHOW:
            return self._show(statement.name or "")
        name = statement.name or ""
        if statement.local and self._kept is None:
            return self._set_local_outside_block(name, statement.value)
        if statement.kind is Kind.RESET:
            result = self._reset(name)
        else:
            result = self._set(name, statement.value)
        if self._kept is not None and not statement.local:
            self._kept = _keep(self._kept, self._settings(), name)
        return result

    def _control(self, statement: TransactionStatement) -> StatementResult:
        """BEGIN, COMMIT, ROLLBACK, SET TRANSACTION [SNAPSHOT] and SET SESSION
        CHARACTERISTICS, as PostgreSQL answers them (proxy.transaction_block)."""
        if isinstance(statement, Begin):
            return self._begin(statement)
        if isinstance(statement, End):
            return self._end(statement)
        block, nested = self._block, bool(self._savepoints)
        defaults = session_defaults(self._parameters)
        if isinstance(statement, ImportSnapshot):
            raise snapshot_error(block, defaults, statement.snapshot, nested=nested)
        if statement.session:
            return self._set_defaults(statement)
        notices = set_modes(
            block, defaults, statement.modes, nested=nested, statement="SET TRANSACTION"
        )
        return StatementResult(tag="SET", notices=notices)

    def _begin(self, begin: Begin) -> StatementResult:
        """BEGIN or START TRANSACTION: a block with ``begin``'s modes (none if they are
        refused); in a block, its modes are set as by SET TRANSACTION."""
        defaults = session_defaults(self._parameters)
        if self._block is None:
            block = dataclasses.replace(defaults)
            set_modes(block, defaults, begin.modes, nested=False)
            self._open_block(implicit=False, modes=block)
            return StatementResult(tag=begin.tag)
        nested, already = bool(self._savepoints), not self._implicit
        notices = set_modes(self._block, defaults, begin.modes, nested=nested, already=already)
        self._implicit = False  # as PostgreSQL: the implicit block becomes an explicit one
        return StatementResult(tag=begin.tag, notices=notices)

    def _end(self, end: End) -> StatementResult:
        """COMMIT/END or ROLLBACK/ABORT [AND [NO] CHAIN] (a failed block is rolled back);
        AND CHAIN begins a new block at once with the same modes, as PostgreSQL."""
        block, failed = self._block, self._status is TransactionStatus.FAILED
        refused = end_refusal(
            end, in_block=block is not None, implicit=self._implicit, failed=failed
        )
        if refused is not None:
            raise refused
        committed = end.commit and self._status is TransactionStatus.IN_TRANSACTION
        tag = end.name if block is None else ("COMMIT" if committed else "ROLLBACK")
        # Outside a block, and in a Query's implicit one (which it ends), a warning.
        warning = _warning("there is no transaction in progress", NO_ACTIVE_SQL_TRANSACTION)
        notices = (warning,) if block is None or self._implicit else ()
        self._end_block(commit=committed)
        if end.chain and block is not None:
            self._open_block(implicit=False, modes=block)
        return StatementResult(tag=tag, notices=notices)

    def _set_mode_parameter(self, name: str, value: str | None, tag: str) -> StatementResult:
        """SET, SET ... TO DEFAULT (``value`` None) or RESET of a transaction_* parameter:
        the current transaction's mode, as in PostgreSQL."""
        mode = parameter_mode(name, value, self._parameters)
        reset = value is None and name == "transaction_isolation"
        defaults = session_defaults(self._parameters)
        nested, statement = bool(self._savepoints), "RESET TRANSACTION" if reset else None
        notices = set_modes(self._block, defaults, (mode,), nested=nested, statement=statement)
        return StatementResult(tag=tag, notices=notices)

    def _set_defaults(self, statement: SetModes) -> StatementResult:
        """SET SESSION CHARACTERISTICS AS TRANSACTION: SET of default_transaction_* for
        each mode, all or none; SET LOCAL outside a block changes nothing (no warning, as
        in PostgreSQL)."""
        before, kept = self._settings(), self._kept
        try:
            for name, value in statement.modes:
                default = SESSION_DEFAULTS[name]
                self._set(default, value)
                if self._kept is not None and not statement.local:
                    self._kept = _keep(self._kept, self._settings(), default)
        except QueryError:
            self._restore(before)
            self._kept = kept
            raise
        if statement.local and kept is None:
            self._restore(before)
        return StatementResult(tag="SET")

    def _open_block(self, *, implicit: bool, modes: TransactionBlock) -> None:
        """Open a block with the isolation level and access mode of ``modes``."""
        self._status = TransactionStatus.IN_TRANSACTION
        self._begun = self._kept = self._settings()
        self._implicit = implicit
        self._block = TransactionBlock(modes.isolation, read_only=modes.read_only)

    def _next_of_several(self) -> None:
        """Before each statement of a Query of several: stop if a cancel request came;
        else open the implicit transaction block if no block is open, as PostgreSQL."""
        if self._several_canceled:
            raise canceled()
        if self._status is TransactionStatus.IDLE:
            self._open_block(implicit=True, modes=session_defaults(self._parameters))

    def _end_block(self, *, commit: bool) -> None:
        """End the transaction block (if any): keep what COMMIT keeps, or go back to the
        settings at its start."""
        restored = self._kept if commit else self._begun
        if self._status is not TransactionStatus.IDLE:
            self._transactions_ended += 1
        self._status = TransactionStatus.IDLE
        self._savepoints.clear()
        self._cursors.end_transaction(commit=commit)
        self._begun = self._kept = None
        self._block = None
        self._implicit = False
        if restored is not None:
            self._restore(restored)

    def _set_local_outside_block(self, name: str, value: str | None) -> StatementResult:
        """As PostgreSQL: a warning, and no effect (the value is still checked)."""
        saved = self._settings()
        self._set(name, value)
        self._restore(saved)
        message = "SET LOCAL can only be used in transaction blocks"
        return StatementResult(tag="SET", notices=(_warning(message, NO_ACTIVE_SQL_TRANSACTION),))

    def _settings(self) -> _Settings:
        return _Settings(
            epsilon=self._epsilon,
            mechanism=self._mechanism,
            delta=self._delta,
            report=self._report_mode,
            bias_check=self._bias_check,
            parameters=dict(self._parameters),
        )

    def _restore(self, settings: _Settings) -> None:
        """Put ``settings`` back."""
        self._epsilon = settings.epsilon
        self._mechanism = settings.mechanism
        self._delta = settings.delta
        self._report_mode = settings.report
        self._bias_check = settings.bias_check
        # As PostgreSQL, a custom parameter once defined stays so (empty) when the value
        # it was given is undone.
        custom = {name: "" for name in self._parameters if is_placeholder(name)}
        self._parameters = {**custom, **settings.parameters}
        self._snapshot = None

    def _transaction_statement(self, statement: SessionStatement) -> StatementResult:
        """SAVEPOINT, RELEASE, ROLLBACK TO, DISCARD and DEALLOCATE. Prepared statements
        are the server's: it drops them after DEALLOCATE or DISCARD ALL succeeds here."""
        name = statement.name or ""
        kept = self._kept  # None outside a transaction block (set in an implicit one too)
        in_block = kept is not None
        if statement.kind is Kind.DEALLOCATE:
            return StatementResult(tag="DEALLOCATE" if statement.name else "DEALLOCATE ALL")
        if statement.kind is Kind.DISCARD:
            if name == "all":
                if in_block:
                    raise QueryError(
                        ACTIVE_SQL_TRANSACTION, "DISCARD ALL cannot run inside a transaction block"
                    )
                self._reset("all")
                self._cursors.close_all()
                return StatementResult(tag="DISCARD ALL")
            return StatementResult(tag=f"DISCARD {name.upper()}")
        what = "SAVEPOINT" if statement.kind is Kind.SAVEPOINT else statement.kind.value
        if kept is None or self._implicit:  # as PostgreSQL, not in a Query's implicit block
            raise QueryError(
                NO_ACTIVE_SQL_TRANSACTION, f"{what} can only be used in transaction blocks"
            )
        if statement.kind is Kind.SAVEPOINT:
            self._savepoints.append(_Savepoint(name, self._settings(), kept))
            return StatementResult(tag="SAVEPOINT")
        names = [savepoint.name for savepoint in self._savepoints]
        if name not in names:
            raise QueryError(INVALID_SAVEPOINT_SPECIFICATION, f'savepoint "{name}" does not exist')
        position = len(names) - 1 - names[::-1].index(name)
        if statement.kind is Kind.RELEASE:
            del self._savepoints[position:]
            self._cursors.release(position)
            return StatementResult(tag="RELEASE")
        del self._savepoints[position + 1 :]
        self._cursors.rollback_to(position)
        self._status = TransactionStatus.IN_TRANSACTION
        savepoint = self._savepoints[position]
        self._kept = savepoint.kept
        self._restore(savepoint.settings)
        return StatementResult(tag="ROLLBACK")

    def _show(self, name: str) -> StatementResult:
        if name == EPSILON_PARAMETER:
            value = self._epsilon.plain
        elif name == MECHANISM_PARAMETER:
            value = self._mechanism.value
        elif name == DELTA_PARAMETER:
            value = format_delta(self._delta)
        elif name == REPORT_PARAMETER:
            value = self._report_mode
        elif name == BIAS_CHECK_PARAMETER:
            value = on_off(self._bias_check)
        elif name == "all":
            # Custom parameters: not, as in PostgreSQL.
            shown = {k: v for k, v in self._parameters.items() if not is_placeholder(k)}
            return show_all({**shown, **self._dpproxy_settings(), **self._transaction_values()})
        elif name in TRANSACTION_PARAMETERS:
            value = self._transaction_values()[name]
        elif name in self._parameters:
            value = self._parameters[name]
        else:
            raise _unknown(name)
        column = ColumnDescription(spelling(name), TEXT_OID)
        return StatementResult(tag="SHOW", columns=(column,), rows=((value,),))

    async def _show_budget(self) -> StatementResult:
        """The analyst's budget as stored now (admins may change it live). Never charged."""
        stored = await self._pipeline.ledger.analyst(self._asker.analyst)
        if stored is None:
            value = "no budget: this analyst was removed by an admin"
        else:
            cost = self._epsilon.plain
            if self._mechanism is Mechanism.GAUSSIAN:
                rho = Rho.from_nano(laplace_rho_nano(self._epsilon))
                delta = format_delta(stored.budget.delta)
                cost = f"ρ={rho.plain}, Gaussian; amounts are ε at δ={delta}"
            value = (
                f"{stored.remaining.plain} left of {stored.budget.total.plain} "
                f"({stored.spent.plain} spent; next query costs {cost})"
            )
            if stored.budget.delta > 0:
                value += (
                    f"; δ: {format_delta(stored.delta_spent)} spent by partition selection, "
                    f"{format_delta(stored.delta_remaining)} left of "
                    f"{format_delta(stored.budget.delta)} (a query grouping by keys found in "
                    f"the data spends δ={format_delta(self._delta)})"
                )
        column = ColumnDescription(BUDGET_PARAMETER, TEXT_OID)
        return StatementResult(tag="SHOW", columns=(column,), rows=((value,),))

    def _reset(self, name: str) -> StatementResult:
        """RESET: back to the value the session started with (its startup parameters,
        else the defaults), as PostgreSQL does; RESET ALL: every setting."""
        defaults = self._defaults
        if name == "all":
            self._restore(defaults)
            return StatementResult(tag="RESET")
        if name in TRANSACTION_PARAMETERS:
            return self._set_mode_parameter(name, None, "RESET")
        field = _FIELDS.get(name)
        if field is not None:
            current = self._settings()
            self._restore(dataclasses.replace(current, **{field: getattr(defaults, field)}))
            return StatementResult(tag="RESET")
        if not known(name):
            raise _unknown(name)
        if name in READ_ONLY_PARAMETERS:
            raise QueryError(CANT_CHANGE_RUNTIME_PARAM, f'parameter "{name}" cannot be changed')
        check_name(name)
        self._put_parameter(name, defaults.parameters.get(name, ""))  # "": a custom one's
        return StatementResult(tag="RESET")

    def apply_startup_parameters(self, parameters: Mapping[str, str]) -> None:
        """The startup packet's settings, applied as SET would apply them, as PostgreSQL
        does: ``options`` first (libpq's PGOPTIONS, ``-c name=value`` or ``--name=value``),
        then every other parameter but ``user``, ``database`` and ``replication``
        (asyncpg's server_settings, pgJDBC's DateStyle, TimeZone and extra_float_digits,
        libpq's application_name and client_encoding). They become what RESET goes back
        to. Raises QueryError, which ends the connection (FATAL) as in PostgreSQL, for an
        unknown parameter or a bad value, and for a replication connection."""
        check_replication(parameters.get("replication"))
        settings = parse_startup_options(parameters.get("options", ""))
        settings += [(k, v) for k, v in parameters.items() if k not in _PROTOCOL_PARAMETERS]
        for name, value in settings:
            lowered = name.lower()
            if lowered == "transaction":  # SET TRANSACTION's name for dpproxy, not a setting
                raise _unknown(lowered)
            if lowered in TRANSACTION_PARAMETERS:
                check_startup_mode(lowered, value, self._parameters)
                continue
            self._set(lowered, value)
        self._defaults = self._settings()

    def _set(self, name: str, value: str | None) -> StatementResult:
        if name in TRANSACTION_PARAMETERS:
            return self._set_mode_parameter(name, value, "SET")
        if value is None:  # SET name TO DEFAULT
            if name == "all":
                raise _unknown(name)
            return dataclasses.replace(self._reset(name), tag="SET")
        if name == EPSILON_PARAMETER:
            self._epsilon = self._parse_epsilon(value)
            return StatementResult(tag="SET")
        if name == MECHANISM_PARAMETER:
            self._mechanism = self._parse_mechanism(value)
            return StatementResult(tag="SET")
        if name == DELTA_PARAMETER:
            self._delta = self._parse_delta(value)
            return StatementResult(tag="SET")
        if name == REPORT_PARAMETER:
            self._report_mode = self._parse_report(value)
            return StatementResult(tag="SET")
        if name == BIAS_CHECK_PARAMETER:
            self._bias_check = parse_bias_check(value)
            return StatementResult(tag="SET")
        if not known(name):
            raise _unknown(name)
        if name in READ_ONLY_PARAMETERS:
            raise QueryError(CANT_CHANGE_RUNTIME_PARAM, f'parameter "{name}" cannot be changed')
        self._put_parameter(
            name, checked_value(name, value, self._parameters, self._defaults.parameters)
        )
        return StatementResult(tag="SET")

    def _parse_report(self, value: str) -> Report:
        wanted = value.strip().lower()
        for report in REPORTS:
            if report == wanted:
                return report
        raise QueryError(
            INVALID_PARAMETER_VALUE,
            f'invalid value for {REPORT_PARAMETER}: "{value}"',
            hint=f"use SET {REPORT_PARAMETER} = notice or columns",
        )

    def _parse_mechanism(self, value: str) -> Mechanism:
        try:
            mechanism = Mechanism(value.strip().lower())
        except ValueError:
            raise QueryError(
                INVALID_PARAMETER_VALUE,
                f'invalid value for {MECHANISM_PARAMETER}: "{value}"',
                hint=f"use SET {MECHANISM_PARAMETER} = laplace or gaussian",
            ) from None
        if mechanism is Mechanism.GAUSSIAN and self._asker.budget.delta == 0:
            raise QueryError(
                INVALID_PARAMETER_VALUE,
                "Gaussian answers need a budget with δ above 0; this analyst's δ is 0",
                hint="ask an admin for a δ (e.g. 1e-6), or keep the laplace mechanism",
            )
        return mechanism

    def _parse_delta(self, value: str) -> Decimal:
        """The δ a query may spend on partition selection: 0 (keys found in the data are
        refused), or from 1e-15 up to the analyst's δ (what remains is checked per query)."""
        budget = self._asker.budget
        try:
            delta = parse_delta(value)
        except InvalidAmount:
            raise QueryError(
                INVALID_PARAMETER_VALUE,
                f'invalid value for {DELTA_PARAMETER}: "{value}"',
                hint=f"use 0 or a small number, e.g. SET {DELTA_PARAMETER} = 1e-9",
            ) from None
        if delta > budget.delta:
            if budget.delta == 0:
                raise QueryError(
                    INVALID_PARAMETER_VALUE,
                    f"{DELTA_PARAMETER} must be 0: this analyst's budget has δ = 0 (pure ε)",
                    hint="declare public domains for GROUP BY keys, or ask an admin for a δ",
                )
            raise QueryError(
                INVALID_PARAMETER_VALUE,
                f"{DELTA_PARAMETER} = {value} is above this analyst's δ "
                f"({format_delta(budget.delta)})",
                hint=f"use at most {format_delta(budget.delta)}; SHOW {BUDGET_PARAMETER} "
                "shows the δ left",
            )
        if delta and delta_units(delta) != delta.scaleb(15):
            raise QueryError(
                INVALID_PARAMETER_VALUE,
                f"{DELTA_PARAMETER} = {value} is finer than 1e-15, the unit δ is accounted in",
                hint=f"use 0 or a value such as 1e-9, e.g. SET {DELTA_PARAMETER} = 1e-9",
            )
        return delta

    def _parse_epsilon(self, value: str) -> Epsilon:
        budget = self._asker.budget
        try:
            epsilon = Epsilon(value)
        except (InvalidAmount, ValueError) as error:
            raise QueryError(
                INVALID_PARAMETER_VALUE,
                f'invalid value for {EPSILON_PARAMETER}: "{value}" ({error})',
                hint=f"use a positive number, e.g. SET {EPSILON_PARAMETER} = 0.5",
            ) from None
        if epsilon.is_zero():
            raise QueryError(
                INVALID_PARAMETER_VALUE,
                f"{EPSILON_PARAMETER} must be greater than 0",
                hint=f"use a positive number, e.g. SET {EPSILON_PARAMETER} = 0.5",
            )
        if Decimal(epsilon.plain) != Decimal(value.strip()):
            # Amounts are kept in units of 1e-9 and rounded up: say so rather than charge
            # more than was asked for.
            raise QueryError(
                INVALID_PARAMETER_VALUE,
                f"{EPSILON_PARAMETER} = {value} has more than 9 decimal places; budgets are "
                "kept to 9 decimal places (the smallest ε is 0.000000001)",
                hint=f"use e.g. SET {EPSILON_PARAMETER} = {epsilon.plain}",
            )
        if epsilon > budget.effective_cap:
            raise QueryError(
                INVALID_PARAMETER_VALUE,
                f"{EPSILON_PARAMETER} = {value} is above the most one query may spend "
                f"({budget.effective_cap})",
                hint=f"use at most {budget.effective_cap.plain}",
            )
        return epsilon

    async def _copy(self, sql: str) -> StatementResult:
        """COPY (query) TO STDOUT: the query answered exactly as the same query sent alone
        (a catalog answer, or planned, charged and audited by the pipeline, its NOTICE
        too), then its rows as PostgreSQL's COPY writes them (proxy.copy_out). A COPY that
        dpproxy does not run, or whose FORCE_QUOTE names no column of the query, is
        refused and audited before the query runs: nothing is charged. An error of the
        query that says where it is (line, column) says it in the COPY's text."""
        copy = await self._read_copy(sql)
        try:
            if copy.format.force_quote:  # the query's columns, known before its charge
                columns = await self.describe(copy.query) or ()
                try:
                    forced_columns(copy.format, [column.name for column in columns])
                except QueryError as error:
                    await self._pipeline.audit_rejected(self._asker, sql, error.message)
                    raise
            answer = await self._answer_query(copy.query)
        except QueryError as error:
            raise Statement(copy.query, *copy.place).placed(error) from None
        return copy_result(answer, copy.format)

    async def _read_copy(self, sql: str) -> CopyTo:
        """The COPY ``sql`` is (proxy.copy_statement); one refused is audited as rejected."""
        try:
            return read_copy(sql)
        except QueryError as error:
            await self._pipeline.audit_rejected(self._asker, sql, error.message)
            raise


INVALID_SAVEPOINT_SPECIFICATION = "3B001"
_DPPROXY_SETTINGS = frozenset(
    {EPSILON_PARAMETER, MECHANISM_PARAMETER, REPORT_PARAMETER, DELTA_PARAMETER}
    | {BIAS_CHECK_PARAMETER}
)
#: SET of these takes one value (proxy.set_statement.read_set); others may be lists.
_KNOWN_PARAMETERS = SINGLE_VALUED | _DPPROXY_SETTINGS
#: Read again by proxy.transaction_block (with SET TRANSACTION).
_CONTROL_KINDS = frozenset({Kind.BEGIN, Kind.COMMIT, Kind.ROLLBACK})
_CURSOR_KINDS = frozenset({Kind.DECLARE, Kind.FETCH, Kind.MOVE, Kind.CLOSE})
_CLEANUP_KINDS = frozenset(
    {Kind.SAVEPOINT, Kind.RELEASE, Kind.ROLLBACK_TO, Kind.DISCARD, Kind.DEALLOCATE}
)


def _warning(message: str, code: str = WARNING) -> Notice:
    return Notice(message=message, severity="WARNING", code=code)


_FIELDS = {
    EPSILON_PARAMETER: "epsilon",
    MECHANISM_PARAMETER: "mechanism",
    DELTA_PARAMETER: "delta",
    REPORT_PARAMETER: "report",
    BIAS_CHECK_PARAMETER: "bias_check",
}


def _keep(kept: _Settings, current: _Settings, name: str) -> _Settings:
    """``kept`` with the value a plain SET or RESET of ``name`` (or RESET ALL) just set."""
    if name == "all":
        return current
    field = _FIELDS.get(name)
    if field is not None:
        return dataclasses.replace(kept, **{field: getattr(current, field)})
    if name in current.parameters:
        parameters = {**kept.parameters, name: current.parameters[name]}
        return dataclasses.replace(kept, parameters=parameters)
    return kept


def _unknown(name: str) -> QueryError:
    refused = refusal(name)  # one of PostgreSQL's that dpproxy leaves out, and why
    if refused is not None:
        return refused
    hint = None
    if name.startswith("dpproxy."):
        hint = (
            f"dpproxy's settings: {EPSILON_PARAMETER}, {DELTA_PARAMETER}, {MECHANISM_PARAMETER}, "
            f"{REPORT_PARAMETER}, {BIAS_CHECK_PARAMETER}, {BUDGET_PARAMETER} (SHOW only)"
        )
    return QueryError(UNDEFINED_OBJECT, f'unrecognized configuration parameter "{name}"', hint=hint)


def parse_bias_check(value: str | None) -> bool:
    """``SET dpproxy.bias_check``: a boolean as PostgreSQL reads one (on/off, true/false,
    yes/no, 1/0, or a unique prefix of these words, in any case); DEFAULT means off."""
    if value is None:
        return False
    flag = parse_bool(value.strip())
    if flag is not None:
        return flag
    raise QueryError(
        INVALID_PARAMETER_VALUE,
        f'invalid value for {BIAS_CHECK_PARAMETER}: "{value}" (a Boolean is expected)',
        hint=f"use SET {BIAS_CHECK_PARAMETER} = on (each query spends {CHECK_SHARE:.0%} of its "
        "ε, or ρ, on checking for bias) or off",
    )


def default_query_delta(budget: AnalystBudget) -> Decimal:
    """The δ a query may spend on partition selection unless the session sets one: a
    thousandth of the analyst's δ (0 for a pure-ε analyst), rounded down to 1e-15."""
    share = budget.delta / DEFAULT_DELTA_FRACTION
    return share.quantize(Decimal("1e-15"), rounding="ROUND_FLOOR")


def parse_startup_options(options: str) -> list[tuple[str, str]]:
    """``-c name=value`` / ``-cname=value`` / ``--name=value`` pairs of a startup packet's
    ``options``, split on spaces as PostgreSQL does (a backslash escapes the next
    character). Raises QueryError for anything else."""
    words: list[str] = []
    current: list[str] = []
    escaped = False
    for character in options:
        if escaped:
            current.append(character)
            escaped = False
        elif character == "\\":
            escaped = True
        elif character.isspace():
            if current:
                words.append("".join(current))
                current = []
        else:
            current.append(character)
    if current:
        words.append("".join(current))
    pairs: list[tuple[str, str]] = []
    index = 0
    while index < len(words):
        word = words[index]
        if word == "-c" and index + 1 < len(words):
            setting, index = words[index + 1], index + 2
        elif word.startswith(("-c", "--")) and len(word) > 2:
            setting, index = word[2:], index + 1
        else:
            raise QueryError(
                INVALID_PARAMETER_VALUE,
                f'invalid command-line argument for server process: "{word}"',
                hint="dpproxy takes options of the form -c name=value (PGOPTIONS)",
            )
        name, equals, value = setting.partition("=")
        if not equals or not name:
            raise QueryError(
                INVALID_PARAMETER_VALUE,
                f"-c {setting} requires a value: write -c name=value",
            )
        # --statement-timeout=0 means statement_timeout (PostgreSQL's dashes for underscores).
        pairs.append((name if name.startswith("dpproxy.") else name.replace("-", "_"), value))
    return pairs


# --- Startup parameters ---------------------------------------------------------------

# Startup packet keys that are not settings (PostgreSQL reads them itself).
_PROTOCOL_PARAMETERS = frozenset({"user", "database", "options", "replication"})


def check_replication(value: str | None) -> None:
    """The startup packet's ``replication``: absent or false (false/off/no/0), else the
    connection is refused, since dpproxy serves no replication (physical or logical)."""
    if value is None:
        return
    flag = False if value == "database" else parse_bool(value)
    if flag is None:
        raise QueryError(
            INVALID_PARAMETER_VALUE,
            f'invalid value for parameter "replication": "{value}"',
            hint='Valid values are: "false", 0, "true", 1, "database".',
        )
    if value == "database" or flag:
        raise QueryError(
            FEATURE_NOT_SUPPORTED,
            f"dpproxy does not serve replication connections (replication={value})",
            hint="connect without the replication parameter: dpproxy answers queries only",
        )
