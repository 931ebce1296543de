"""SCRAM-SHA-256 authentication, server side (RFC 5802, RFC 7677), on hashlib/hmac only.

Verifiers use PostgreSQL's stored format so that ``rolpassword`` values can be copied:
``SCRAM-SHA-256$<iterations>:<salt b64>$<StoredKey b64>:<ServerKey b64>``.

Compatibility notes:

- libpq sends an empty user name (``n=,``) in client-first: the user comes from the
  startup packet, so the name in the SCRAM message is ignored, as PostgreSQL does.
- Channel binding (``p=tls-server-end-point``) is refused: dpproxy does not speak TLS yet
  and advertises only ``SCRAM-SHA-256``, not ``-PLUS``.
- Passwords are prepared with SASLprep (RFC 4013) the way PostgreSQL's ``pg_saslprep``
  does: pure-ASCII passwords are used unchanged; otherwise non-ASCII spaces map to space,
  "commonly mapped to nothing" characters are dropped, the result is NFKC-normalised, and
  if it then contains a prohibited or unassigned code point or breaks the bidi rule, the
  raw password is used instead. The approximation: the tables are Python's ``stringprep``
  (Unicode 3.2, as RFC 3454) and NFKC uses Python's Unicode version, whereas PostgreSQL
  uses its own Unicode tables; results differ only for code points assigned after those
  versions.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import stringprep
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

MECHANISM = "SCRAM-SHA-256"
DEFAULT_ITERATIONS = 4096
SALT_LENGTH = 16
_NONCE_BYTES = 18
_KEY_LENGTH = 32


class ScramError(Exception):
    """Base of SCRAM failures; ``sqlstate`` is the code to send to the client."""

    sqlstate = "28000"


class ScramProtocolError(ScramError):
    """The client's SCRAM message is malformed or asks for something unsupported."""

    sqlstate = "08P01"


class ScramAuthenticationFailed(ScramError):
    """Wrong password or unknown user. The client must not be told which."""

    sqlstate = "28P01"

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class InvalidVerifier(ValueError):
    """A stored verifier does not have PostgreSQL's SCRAM-SHA-256 format."""


# ---------------------------------------------------------------------------------------
# SASLprep (RFC 4013), as PostgreSQL applies it to passwords


def _prohibited(ch: str) -> bool:
    return (
        stringprep.in_table_c12(ch)
        or stringprep.in_table_c21_c22(ch)
        or stringprep.in_table_c3(ch)
        or stringprep.in_table_c4(ch)
        or stringprep.in_table_c5(ch)
        or stringprep.in_table_c6(ch)
        or stringprep.in_table_c7(ch)
        or stringprep.in_table_c8(ch)
        or stringprep.in_table_c9(ch)
        or stringprep.in_table_a1(ch)
    )


def saslprep_password(password: str) -> bytes:
    """The bytes that enter PBKDF2 for ``password`` (PostgreSQL's rules; see module doc)."""
    try:
        raw = password.encode("utf-8")
    except UnicodeEncodeError:
        # Not valid UTF-8 (lone surrogates from surrogateescape): use the bytes as they are.
        return password.encode("utf-8", "surrogateescape")
    if raw.isascii():
        return raw
    mapped = "".join(
        " " if stringprep.in_table_c12(ch) else ch
        for ch in password
        if not stringprep.in_table_b1(ch)
    )
    if not mapped:
        return raw
    normalized = unicodedata.normalize("NFKC", mapped)
    if any(_prohibited(ch) for ch in normalized):
        return raw
    if any(stringprep.in_table_d1(ch) for ch in normalized) and (
        any(stringprep.in_table_d2(ch) for ch in normalized)
        or not stringprep.in_table_d1(normalized[0])
        or not stringprep.in_table_d1(normalized[-1])
    ):
        return raw
    return normalized.encode("utf-8")


# ---------------------------------------------------------------------------------------
# Verifiers


@dataclass(frozen=True)
class ScramVerifier:
    iterations: int
    salt: bytes
    stored_key: bytes
    server_key: bytes

    def __str__(self) -> str:
        return (
            f"{MECHANISM}${self.iterations}:{_b64(self.salt)}"
            f"${_b64(self.stored_key)}:{_b64(self.server_key)}"
        )


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"), validate=True)


def _hmac(key: bytes, msg: bytes) -> bytes:
    return hmac.digest(key, msg, "sha256")


def salted_password(password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac("sha256", saslprep_password(password), salt, iterations)


def make_verifier(
    password: str, *, salt: bytes | None = None, iterations: int = DEFAULT_ITERATIONS
) -> str:
    """A PostgreSQL-format SCRAM-SHA-256 verifier for ``password``."""
    if iterations < 1:
        raise ValueError("iterations must be positive")
    if salt is None:
        salt = secrets.token_bytes(SALT_LENGTH)
    salted = salted_password(password, salt, iterations)
    client_key = _hmac(salted, b"Client Key")
    stored_key = hashlib.sha256(client_key).digest()
    server_key = _hmac(salted, b"Server Key")
    return str(ScramVerifier(iterations, salt, stored_key, server_key))


def parse_verifier(text: str) -> ScramVerifier:
    """Parse ``SCRAM-SHA-256$<iter>:<salt>$<StoredKey>:<ServerKey>``; raise InvalidVerifier."""
    try:
        mechanism, iter_salt, keys = text.split("$")
        iterations_text, salt_text = iter_salt.split(":")
        stored_text, server_text = keys.split(":")
        iterations = int(iterations_text)
        salt = _unb64(salt_text)
        stored_key = _unb64(stored_text)
        server_key = _unb64(server_text)
    except (ValueError, binascii.Error, UnicodeEncodeError) as exc:
        raise InvalidVerifier("not a SCRAM-SHA-256 verifier") from exc
    if mechanism != MECHANISM:
        raise InvalidVerifier(f"unsupported mechanism {mechanism!r}")
    if iterations < 1 or not salt:
        raise InvalidVerifier("iterations must be positive and the salt non-empty")
    if len(stored_key) != _KEY_LENGTH or len(server_key) != _KEY_LENGTH:
        raise InvalidVerifier("StoredKey and ServerKey must be 32 bytes")
    return ScramVerifier(iterations, salt, stored_key, server_key)


_MOCK_KEY = secrets.token_bytes(32)


def mock_verifier(user: str, *, key: bytes = _MOCK_KEY) -> ScramVerifier:
    """A verifier no password matches, for an unknown user.

    The salt is derived from the user name and a per-process secret so that repeated
    attempts for the same unknown user see the same salt, as they would for a real one.
    """
    salt = _hmac(key, b"salt\x00" + user.encode("utf-8", "surrogateescape"))[:SALT_LENGTH]
    return ScramVerifier(
        DEFAULT_ITERATIONS, salt, secrets.token_bytes(_KEY_LENGTH), secrets.token_bytes(32)
    )


# ---------------------------------------------------------------------------------------
# The exchange


class _Step(Enum):
    CLIENT_FIRST = 1
    CLIENT_FINAL = 2
    DONE = 3


def _attributes(message: str, what: str) -> list[tuple[str, str]]:
    """Split ``a=1,b=2`` into pairs; every part must be ``<letter>=<value>``."""
    pairs = []
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=" or not part[0].isascii() or not part[0].isalpha():
            raise ScramProtocolError(f"malformed SCRAM message ({what}: bad attribute)")
        pairs.append((part[0], part[2:]))
    return pairs


def new_server_nonce() -> str:
    """18 random bytes from the OS, base64-encoded (as PostgreSQL does)."""
    return _b64(secrets.token_bytes(_NONCE_BYTES))


def _printable_nonce(nonce: str) -> bool:
    return bool(nonce) and all(0x21 <= ord(c) <= 0x7E and c != "," for c in nonce)


class ScramExchange:
    """One server-side SCRAM-SHA-256 exchange.

    ``verifier`` is the stored verifier, or None for an unknown user: the exchange then
    runs against a mock verifier and always fails at the proof, with the same messages
    and the same work as a wrong password. ``nonce_factory`` exists for test vectors.
    """

    def __init__(
        self,
        verifier: str | None,
        *,
        user: str = "",
        nonce_factory: Callable[[], str] = new_server_nonce,
    ) -> None:
        self._nonce_factory = nonce_factory
        self._unknown_user = verifier is None
        self._verifier = mock_verifier(user) if verifier is None else parse_verifier(verifier)
        self._step = _Step.CLIENT_FIRST
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""

    @property
    def done(self) -> bool:
        return self._step is _Step.DONE

    def server_first(self, client_first: bytes) -> bytes:
        """Consume client-first-message; return server-first-message."""
        if self._step is not _Step.CLIENT_FIRST:
            raise ScramProtocolError("SCRAM client-first message received out of order")
        self._step = _Step.DONE  # any failure ends the exchange
        text = _decode(client_first, "client-first-message")
        flag, sep1, rest = text.partition(",")
        authzid, sep2, bare = rest.partition(",")
        if not sep1 or not sep2:
            raise ScramProtocolError("malformed SCRAM message (client-first: no GS2 header)")
        if flag.startswith("p="):
            raise ScramProtocolError(
                "channel binding is not supported by dpproxy; connect with "
                "channel_binding=disable or prefer"
            )
        if flag not in ("n", "y"):
            raise ScramProtocolError("malformed SCRAM message (client-first: bad GS2 flag)")
        if authzid:
            raise ScramProtocolError("client uses authorization identity, but it is not supported")
        attrs = _attributes(bare, "client-first")
        if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r":
            if attrs and attrs[0][0] == "m":
                raise ScramProtocolError("client requires an unsupported SCRAM extension")
            raise ScramProtocolError("malformed SCRAM message (client-first: expected n= and r=)")
        client_nonce = attrs[1][1]
        if not _printable_nonce(client_nonce):
            raise ScramProtocolError("malformed SCRAM message (client-first: invalid nonce)")
        self._gs2_header = f"{flag},{authzid},"
        self._client_first_bare = bare
        server_nonce = self._nonce_factory()
        if not _printable_nonce(server_nonce):
            raise ValueError("server nonce must be printable ASCII without commas")
        self._nonce = client_nonce + server_nonce
        v = self._verifier
        self._server_first = f"r={self._nonce},s={_b64(v.salt)},i={v.iterations}"
        self._step = _Step.CLIENT_FINAL
        return self._server_first.encode("ascii")

    def server_final(self, client_final: bytes) -> bytes:
        """Consume client-final-message; return server-final-message or raise."""
        if self._step is not _Step.CLIENT_FINAL:
            raise ScramProtocolError("SCRAM client-final message received out of order")
        self._step = _Step.DONE
        text = _decode(client_final, "client-final-message")
        without_proof, sep, proof_part = text.rpartition(",")
        if not sep or not proof_part.startswith("p="):
            raise ScramProtocolError("malformed SCRAM message (client-final: proof not last)")
        attrs = _attributes(without_proof, "client-final")
        if len(attrs) < 2 or attrs[0][0] != "c" or attrs[1][0] != "r":
            raise ScramProtocolError("malformed SCRAM message (client-final: expected c= and r=)")
        try:
            binding = _unb64(attrs[0][1])
            proof = _unb64(proof_part[2:])
        except (binascii.Error, ValueError) as exc:
            raise ScramProtocolError("malformed SCRAM message (client-final: bad base64)") from exc
        if binding != self._gs2_header.encode("utf-8"):
            raise ScramProtocolError("SCRAM channel binding check failed")
        if not hmac.compare_digest(attrs[1][1].encode("utf-8"), self._nonce.encode("ascii")):
            raise ScramProtocolError("SCRAM nonce mismatch")
        if len(proof) != _KEY_LENGTH:
            raise ScramProtocolError("malformed SCRAM message (client-final: bad proof length)")
        auth_message = ",".join((self._client_first_bare, self._server_first, without_proof))
        auth_bytes = auth_message.encode("utf-8")
        v = self._verifier
        signature = _hmac(v.stored_key, auth_bytes)
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        matches = hmac.compare_digest(hashlib.sha256(client_key).digest(), v.stored_key)
        if self._unknown_user:
            raise ScramAuthenticationFailed("unknown user")
        if not matches:
            raise ScramAuthenticationFailed("wrong password")
        return b"v=" + _b64(_hmac(v.server_key, auth_bytes)).encode("ascii")


def _decode(data: bytes, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScramProtocolError(f"malformed SCRAM message ({what} is not UTF-8)") from exc
