"""The admin tests' configuration: the demo's, with its analysts, in a temporary folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.server import write_config


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return write_config(tmp_path, backend="")
