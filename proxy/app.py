"""The Application behind the wire protocol: analysts, sessions and the query pipeline."""

from __future__ import annotations

import asyncio
import logging

from accountant import AccountantError, Attempt, Decision, StateStoreError
from proxy import __version__
from proxy.asker import Asker
from proxy.pipeline import Pipeline
from proxy.responders import Responder
from proxy.seam import ClientInfo, QueryError
from proxy.session import AnalystSession
from proxy.settings import Settings
from proxy.sqlstate import INVALID_AUTHORIZATION

logger = logging.getLogger("dpproxy.app")

SERVER_VERSION = f"15.0 (dpproxy {__version__})"


class DpproxyApp:
    def __init__(
        self, settings: Settings, pipeline: Pipeline, responders: tuple[Responder, ...] = ()
    ) -> None:
        self._settings = settings
        self._pipeline = pipeline
        self._responders = responders
        self._background: set[asyncio.Task[object]] = set()

    async def scram_verifier(self, user: str) -> str | None:
        # The state store is the source of truth (the configuration only seeds it), read
        # at every login so that `dpproxy analyst add|remove|passwd` apply at once.
        try:
            analyst = await self._pipeline.ledger.analyst_for_login(user)
        except AccountantError:
            logger.exception("cannot read analyst %r from the state store; login refused", user)
            return None
        return None if analyst is None else analyst.verifier

    def server_parameters(self) -> dict[str, str]:
        return {
            "server_version": SERVER_VERSION,
            "server_encoding": "UTF8",
            "client_encoding": "UTF8",
            "DateStyle": "ISO, MDY",
            "IntervalStyle": "postgres",
            "integer_datetimes": "on",
            "standard_conforming_strings": "on",
            "TimeZone": "UTC",
            "is_superuser": "off",
            "default_transaction_read_only": "on",
        }

    async def open_session(self, client: ClientInfo) -> AnalystSession:
        analyst = await self._pipeline.ledger.analyst(client.user)
        if analyst is None:
            raise QueryError(INVALID_AUTHORIZATION, f'analyst "{client.user}" is not configured')
        asker = Asker(analyst=client.user, budget=analyst.budget, address=client.address)
        session = AnalystSession(
            self._pipeline, asker, "", database=client.database, responders=self._responders
        )
        # Every startup parameter is a setting, as in PostgreSQL (a bad one: FATAL).
        session.apply_startup_parameters(client.parameters)
        logger.info("session opened for %s from %s", client.user, client.address)
        return session

    def log_authentication_failure(self, client: ClientInfo, reason: str) -> None:
        logger.info("authentication failed for %r from %s: %s", client.user, client.address, reason)
        attempt = Attempt(analyst=client.user, client_address=client.address, sql="")
        task = asyncio.get_running_loop().create_task(
            self._record_authentication_failure(attempt, reason)
        )
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _record_authentication_failure(self, attempt: Attempt, reason: str) -> None:
        """The audit record of a failed login, written in the background (the client has
        its answer already). A state store that cannot take it now (locked, unreachable)
        gets it once it can be written (proxy.unrecorded); another failure is logged in one
        line, never left as an unretrieved task exception."""
        try:
            await self._pipeline.ledger.refuse(attempt, Decision.AUTH_FAILED, reason, None)
        except StateStoreError:
            self._pipeline.unrecorded.refused(attempt, Decision.AUTH_FAILED, reason, None)
        except AccountantError as error:
            logger.error(
                "the failed login of %r from %s is missing from the audit log: %s",
                attempt.analyst,
                attempt.client_address,
                error,
            )
        except Exception:  # a bug: its traceback, once, rather than an unretrieved exception
            logger.exception("cannot audit the failed login of %r", attempt.analyst)
