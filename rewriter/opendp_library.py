"""OpenDP, imported and set up the first time a mechanism needs it.

Importing OpenDP takes about 150 ms (it brings NumPy along). Commands that plan or
answer no query (the admin commands, ``dpproxy passwd``) never pay it; the server loads
it as it starts (:func:`opendp`), so that its first query does not.
"""

from __future__ import annotations

from functools import lru_cache
from types import ModuleType


@lru_cache(maxsize=1)
def opendp() -> ModuleType:
    """``opendp.prelude``, with its contrib features enabled (its measurements)."""
    import opendp.prelude as dp  # noqa: PLC0415  # deferred: see the module's docstring

    dp.enable_features("contrib")
    return dp
