"""The one table mapping dpproxy's exceptions to PostgreSQL SQLSTATE codes."""

from __future__ import annotations

from accountant import BudgetExhausted, InvalidAmount, PerQueryCapExceeded, StateStoreError
from proxy.backends import BackendError, QueryCanceled
from proxy.statements import StatementSyntaxError
from rewriter import ReleaseError

SUCCESSFUL_COMPLETION = "00000"
WARNING = "01000"
FEATURE_NOT_SUPPORTED = "0A000"
PROTOCOL_VIOLATION = "08P01"
DUPLICATE_PREPARED_STATEMENT = "42P05"
DUPLICATE_CURSOR = "42P03"
INVALID_SQL_STATEMENT_NAME = "26000"
INVALID_CURSOR_NAME = "34000"
OBJECT_NOT_IN_PREREQUISITE_STATE = "55000"
PROGRAM_LIMIT_EXCEEDED = "54000"
INVALID_PARAMETER_VALUE = "22023"
ACTIVE_SQL_TRANSACTION = "25001"
NO_ACTIVE_SQL_TRANSACTION = "25P01"
IN_FAILED_SQL_TRANSACTION = "25P02"
INVALID_AUTHORIZATION = "28000"
CONNECTION_FAILURE = "08006"
SYNTAX_ERROR = "42601"
UNDEFINED_OBJECT = "42704"
CANT_CHANGE_RUNTIME_PARAM = "55P02"
CONFIGURATION_LIMIT_EXCEEDED = "53400"
QUERY_CANCELED = "57014"
IO_ERROR = "58030"
INTERNAL_ERROR = "XX000"

# Most specific first: the first class an exception is an instance of gives its code.
EXCEPTION_SQLSTATES: tuple[tuple[type[Exception], str], ...] = (
    (BudgetExhausted, CONFIGURATION_LIMIT_EXCEEDED),
    (PerQueryCapExceeded, CONFIGURATION_LIMIT_EXCEEDED),
    (InvalidAmount, INVALID_PARAMETER_VALUE),
    (StatementSyntaxError, SYNTAX_ERROR),
    (QueryCanceled, QUERY_CANCELED),
    (BackendError, INTERNAL_ERROR),
    (ReleaseError, INTERNAL_ERROR),
    (StateStoreError, IO_ERROR),
)


def sqlstate_for(error: Exception) -> str:
    for kind, code in EXCEPTION_SQLSTATES:
        if isinstance(error, kind):
            return code
    return INTERNAL_ERROR
