"""Who is asking: the analyst behind a session, as every step of a query sees them.

Apart from ``proxy.pipeline`` because the session, the login and the responders that answer
before the pipeline (``proxy.responders``) carry it too, and the pipeline's own steps
(``proxy.pre_charge``, ``proxy.reporting``) take it without importing the pipeline.
"""

from __future__ import annotations

from dataclasses import dataclass

from accountant import AnalystBudget


@dataclass(frozen=True)
class Asker:
    """Who is asking: the analyst, their budget, and where they connect from."""

    analyst: str
    budget: AnalystBudget
    address: str
