"""A catalog engine that cannot start stops `dpproxy serve` with one clear error.

Before, CatalogDatabase turned the failure into a RuntimeError, which the CLI printed as
a traceback. Now the runner raises BackendError, which the CLI prints in one line.
A real engine process that cannot start: its Python is told to look for its standard
library where there is none.
"""

from __future__ import annotations

import pytest

from proxy.backends import BackendError
from proxy.runner import catalog_responder
from tests.proxy.test_catalog_engine import _catalog


def test_an_engine_that_cannot_start_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONHOME", "/nonexistent-dpproxy-python-home")
    with pytest.raises(BackendError) as failed:
        catalog_responder(_catalog(), None)
    message = str(failed.value)
    assert message.startswith("the catalog engine did not start: "), message
    assert "did not start: see the line logged above" in message


def test_an_engine_that_starts_is_the_responders() -> None:
    responder = catalog_responder(_catalog(), None)
    responder.close()
