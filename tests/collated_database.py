"""A PostgreSQL database of a test's own whose default collation is not byte order (ICU
en-US), dropped afterwards; and texts to order, as BI tools meet them."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

#: Mixed case, spaces, punctuation, accents, digits, the empty text: no two of them equal
#: under ICU's en-US collation (see ``TIES``).
TEXTS = [
    "b", "B", "a b", "ab", "a-b", "a_b", "a.b", "a,b", "a'b", "a/b", "a+b", "a&b", "A B",
    "Ab", "AB", "aB", "", " ", "  a", "a ", "a", "A", "é", "e", "E", "É", "ê", "è", "ë",
    "f", "ü", "u", "U", "Ü", "ue", "ß", "ss", "SS", "Zoë", "zoe", "Zoe", "naïve", "naive",
    "résumé", "resume", "Resume", "co-op", "co op", "coop", "1", "10", "2", "20", "100",
    "1a", "a1", "a10", "a2", "#1", "-1", "+1", "1.5", "1,5", "$5", "5%", "Oncology",
    "oncology", "Cardiology", "ENT", "E.N.T.", "Emergency", "emergency room",
    "Emergency-Room", "Æble", "aeble", "Ørsted", "Orsted", "Ångström", "Angstrom", "ñ", "n",
    "N", "Ñ", "ç", "c", "C", "œ", "oe", "Straße", "Strasse", "über", "Uber", "Ober", "x",
    "X", "z", "Z", "_", "-", ".", "!", "?", "@", "~", "*", "(", "[", "'", '"', "/", "Δ",
    "δ", "Я", "я", "日本", "€", "½", "O'Brien", "OBrien", "McDonald", "Mc Donald",
    "van Gogh", "Van Gogh", "x-ray", "X-ray", "xray",
]  # fmt: skip
#: Pairs of different texts that ICU's en-US collation finds equal (PostgreSQL orders
#: them by their bytes): an ignored zero-width space, a decomposed é, another script's 1.
TIES = [("a", "a\u200b"), ("\u00e9t\u00e9", "e\u0301t\u00e9"), ("1", "\u0661")]


@contextmanager
def icu_database(dsn: str) -> Iterator[str]:
    """The DSN of a new database whose default collation is ICU's en-US (PostgreSQL 15
    and later); skips the test when the server cannot make one."""
    name = f"dpproxy_icu_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        try:
            conn.execute(
                f"CREATE DATABASE \"{name}\" TEMPLATE template0 ENCODING 'UTF8' "
                "LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'".encode()
            )
        except psycopg.Error as error:
            pytest.skip(f"no database with an ICU collation on this server: {error}")
        try:
            yield make_conninfo(dsn, dbname=name)
        finally:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)'.encode())
