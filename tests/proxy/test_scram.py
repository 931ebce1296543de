"""SCRAM-SHA-256 server side: verifier format, full exchanges with a hand-written client."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import subprocess

import pytest

from proxy.protocol.scram import (
    InvalidVerifier,
    ScramAuthenticationFailed,
    ScramExchange,
    ScramProtocolError,
    make_verifier,
    parse_verifier,
    saslprep_password,
)

# Verifiers produced by PostgreSQL 15 itself (CREATE ROLE ... PASSWORD, then
# pg_authid.rolpassword); the second password needs SASLprep: "ǅ①ﬁ" -> "Dž1fi".
PG_VERIFIERS = [
    (
        "pencil",
        "SCRAM-SHA-256$4096:bpPCJkSOT8efIeVjKBZ3Uw==$qI+N+o8CB8svwudaD12PVoI8ClRgcoEw591/qGa4Rd4="
        ":2taAK46e0aDuEvmU1TnW5YdN9Fws9E/q5f47PSOx25U=",
    ),
    (
        "ǅ①ﬁ",
        "SCRAM-SHA-256$4096:IqAP4gHVnl5DrvquBknZMA==$u3fYTwEXQaDKNMvHk2miXD8ss8Bk9hIvyHyTf+vjaes="
        ":efsf6xPKKRjkjuqTtXcmw7pndtAACroocjDzelwgQKk=",
    ),
]

# RFC 7677 section 3.
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_PROOF = "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
RFC_SERVER_SIGNATURE = "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


# --- a hand-written client (RFC 5802) ---


def _hmac(key: bytes, msg: bytes) -> bytes:
    return hmac.digest(key, msg, "sha256")


class Client:
    def __init__(self, password: str, *, nonce: str = "fyko+d2lbbFgONRv9qkxdawL", user: str = ""):
        self.password = password
        self.nonce = nonce
        self.bare = f"n={user},r={nonce}"
        self.gs2 = "n,,"
        self.server_signature = b""

    def first(self, gs2: str = "n,,") -> bytes:
        self.gs2 = gs2
        return (gs2 + self.bare).encode()

    def final(
        self, server_first: bytes, *, channel: str | None = None, nonce: str | None = None
    ) -> bytes:
        attrs = dict(part.split("=", 1) for part in server_first.decode().split(","))
        assert attrs["r"].startswith(self.nonce)
        if nonce is not None:
            attrs["r"] = nonce
        salted = hashlib.pbkdf2_hmac(
            "sha256",
            saslprep_password(self.password),
            base64.b64decode(attrs["s"]),
            int(attrs["i"]),
        )
        client_key = _hmac(salted, b"Client Key")
        stored_key = hashlib.sha256(client_key).digest()
        c = channel if channel is not None else base64.b64encode(self.gs2.encode()).decode()
        without_proof = f"c={c},r={attrs['r']}"
        auth = f"{self.bare},{server_first.decode()},{without_proof}".encode()
        proof = bytes(a ^ b for a, b in zip(client_key, _hmac(stored_key, auth), strict=True))
        self.server_signature = _hmac(_hmac(salted, b"Server Key"), auth)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def check(self, server_final: bytes) -> bool:
        return server_final == b"v=" + base64.b64encode(self.server_signature)


# --- verifiers ---


@pytest.mark.parametrize(("password", "verifier"), PG_VERIFIERS)
def test_verifier_matches_postgresql(password: str, verifier: str) -> None:
    parsed = parse_verifier(verifier)
    assert make_verifier(password, salt=parsed.salt, iterations=parsed.iterations) == verifier
    assert str(parsed) == verifier


def test_verifier_format_and_fresh_salt() -> None:
    a, b = make_verifier("secret"), make_verifier("secret")
    assert a != b
    mech, iter_salt, keys = a.split("$")
    assert mech == "SCRAM-SHA-256"
    assert iter_salt.startswith("4096:")
    assert len(base64.b64decode(iter_salt.split(":")[1])) == 16
    assert [len(base64.b64decode(k)) for k in keys.split(":")] == [32, 32]
    assert parse_verifier(make_verifier("x", iterations=10)).iterations == 10


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "md5abcdef",
        "SCRAM-SHA-1$4096:c2FsdA==$" + "A" * 44 + ":" + "A" * 44,
        "SCRAM-SHA-256$x:c2FsdA==$" + "A" * 43 + "=:" + "A" * 43 + "=",
        "SCRAM-SHA-256$0:c2FsdA==$" + "A" * 43 + "=:" + "A" * 43 + "=",
        "SCRAM-SHA-256$4096:c2FsdA==$QUJD:QUJD",
        "SCRAM-SHA-256$4096:!!!$" + "A" * 43 + "=:" + "A" * 43 + "=",
    ],
)
def test_parse_verifier_rejects(bad: str) -> None:
    with pytest.raises(InvalidVerifier):
        parse_verifier(bad)


def test_saslprep() -> None:
    assert saslprep_password("pencil") == b"pencil"
    assert saslprep_password("ǅ①ﬁ") == "Dž1fi".encode()
    assert saslprep_password("a\u00a0b") == b"a b"  # non-ASCII space maps to space
    assert saslprep_password("a\u00adb") == b"ab"  # soft hyphen maps to nothing
    # Prohibited after normalisation (private use): the raw password is used.
    assert saslprep_password("a\ue000") == "a\ue000".encode()
    assert saslprep_password("\x07bell") == b"\x07bell"  # ASCII is used unchanged


@pytest.mark.postgres
def test_saslprep_matches_a_fresh_postgresql_verifier() -> None:
    """Ask the local PostgreSQL for a verifier of an awkward password, if one is running."""
    password = "Ⅸ\u00a0ｐａｓｓ\u00ad"
    role = f"dpproxy_scram_test_{os.getpid()}"
    env = {**os.environ, "PGCONNECT_TIMEOUT": "3"}
    base = ["psql", "-h", "127.0.0.1", "-U", "postgres", "-X", "-A", "-t", "-q"]
    setup = (
        f"SET password_encryption='scram-sha-256'; CREATE ROLE {role} LOGIN PASSWORD '{password}';"
    )
    try:
        created = subprocess.run(
            [*base, "-c", setup], check=False, env=env, capture_output=True, timeout=10
        )
    except (FileNotFoundError, subprocess.TimeoutExpired):
        pytest.skip("psql or PostgreSQL not available")
    if created.returncode != 0:
        if os.environ.get("CI") == "true":
            pytest.fail(created.stderr.decode())
        pytest.skip("PostgreSQL not reachable on 127.0.0.1:5432")
    try:
        out = subprocess.run(
            [*base, "-c", f"SELECT rolpassword FROM pg_authid WHERE rolname = '{role}'"],
            env=env,
            capture_output=True,
            check=True,
            timeout=10,
        )
    finally:
        subprocess.run(
            [*base, "-c", f"DROP ROLE {role}"],
            check=False,
            env=env,
            capture_output=True,
            timeout=10,
        )
    verifier = out.stdout.decode().strip()
    parsed = parse_verifier(verifier)
    assert make_verifier(password, salt=parsed.salt, iterations=parsed.iterations) == verifier


# --- exchanges ---


def test_rfc7677_vector() -> None:
    verifier = make_verifier("pencil", salt=RFC_SALT, iterations=4096)
    ex = ScramExchange(verifier, nonce_factory=lambda: RFC_SERVER_NONCE)
    server_first = ex.server_first(f"n,,n=user,r={RFC_CLIENT_NONCE}".encode())
    nonce = RFC_CLIENT_NONCE + RFC_SERVER_NONCE
    assert server_first == f"r={nonce},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096".encode()
    final = ex.server_final(f"c=biws,r={nonce},p={RFC_PROOF}".encode())
    assert final == f"v={RFC_SERVER_SIGNATURE}".encode()
    assert ex.done


@pytest.mark.parametrize("gs2", ["n,,", "y,,"])
@pytest.mark.parametrize("password", ["secret", "ǅ①ﬁ"])
def test_full_exchange_with_empty_username(gs2: str, password: str) -> None:
    client = Client(password)  # libpq sends n= (empty user)
    ex = ScramExchange(make_verifier(password), user="alice")
    server_first = ex.server_first(client.first(gs2))
    assert client.check(ex.server_final(client.final(server_first)))


def test_server_nonce_is_fresh() -> None:
    verifier = make_verifier("secret")
    firsts = {ScramExchange(verifier).server_first(Client("secret").first()) for _ in range(5)}
    assert len(firsts) == 5


def test_wrong_password_fails() -> None:
    client = Client("wrong")
    ex = ScramExchange(make_verifier("secret"))
    server_first = ex.server_first(client.first())
    with pytest.raises(ScramAuthenticationFailed) as info:
        ex.server_final(client.final(server_first))
    assert info.value.reason == "wrong password"
    assert info.value.sqlstate == "28P01"


def test_unknown_user_fails_the_same_way() -> None:
    firsts, errors = [], []
    for ex in (ScramExchange(make_verifier("secret"), user="alice"), ScramExchange(None)):
        client = Client("wrong")
        server_first = ex.server_first(client.first())
        firsts.append(server_first)
        with pytest.raises(ScramAuthenticationFailed) as info:
            ex.server_final(client.final(server_first))
        errors.append((type(info.value), info.value.sqlstate))
    assert errors[0] == errors[1]
    # Same shape of server-first for both (iterations, salt length, nonce length).
    shapes = [[(p[0], len(p)) for p in f.decode().split(",")] for f in firsts]
    assert shapes[0] == shapes[1]


def test_unknown_user_salt_is_stable() -> None:
    """A random salt per attempt would reveal that the user does not exist."""

    def salt_of(user: str) -> str:
        first = ScramExchange(None, user=user).server_first(Client("x").first()).decode()
        return first.split(",")[1]

    assert salt_of("mallory") == salt_of("mallory")
    assert salt_of("mallory") != salt_of("eve")


def test_unknown_user_rejects_even_a_matching_proof() -> None:
    ex = ScramExchange(None, user="ghost")
    client = Client("whatever")
    server_first = ex.server_first(client.first())
    with pytest.raises(ScramAuthenticationFailed):
        ex.server_final(client.final(server_first))


@pytest.mark.parametrize(
    ("client_first", "match"),
    [
        (b"p=tls-server-end-point,,n=,r=abc", "channel binding is not supported"),
        (b"n,a=admin,n=,r=abc", "authorization identity"),
        (b"x,,n=,r=abc", "bad GS2 flag"),
        (b"n,,m=ext,n=,r=abc", "extension"),
        (b"n,,n=,r=", "invalid nonce"),
        (b"n,,r=abc", "expected n= and r="),
        (b"n,,garbage", "bad attribute"),
        (b"nonsense", "no GS2 header"),
        (b"n,,n=,r=\xff", "not UTF-8"),
    ],
)
def test_malformed_client_first(client_first: bytes, match: str) -> None:
    with pytest.raises(ScramProtocolError, match=match):
        ScramExchange(make_verifier("s", iterations=1)).server_first(client_first)


def test_channel_binding_and_nonce_are_checked() -> None:
    verifier = make_verifier("secret", iterations=16)
    client = Client("secret")
    ex = ScramExchange(verifier)
    server_first = ex.server_first(client.first("n,,"))
    # Claims "y,," in c= after sending "n,,": rejected.
    final = client.final(server_first, channel=base64.b64encode(b"y,,").decode())
    with pytest.raises(ScramProtocolError, match="channel binding"):
        ex.server_final(final)

    ex = ScramExchange(verifier)
    server_first = ex.server_first(client.first())
    with pytest.raises(ScramProtocolError, match="nonce"):
        ex.server_final(client.final(server_first, nonce=client.nonce + "forged"))


@pytest.mark.parametrize(
    "client_final",
    [b"", b"c=biws", b"c=biws,r=x", b"c=!!,r=x,p=AAAA", b"c=biws,r=x,p=AAAA", b"r=x,c=biws,p=AAAA"],
)
def test_malformed_client_final(client_final: bytes) -> None:
    ex = ScramExchange(make_verifier("s", iterations=1))
    ex.server_first(Client("s").first())
    with pytest.raises(ScramProtocolError):
        ex.server_final(client_final)


def test_messages_out_of_order() -> None:
    ex = ScramExchange(make_verifier("s", iterations=1))
    with pytest.raises(ScramProtocolError, match="out of order"):
        ex.server_final(b"c=biws,r=x,p=AAAA")
    ex = ScramExchange(make_verifier("s", iterations=1))
    ex.server_first(Client("s").first())
    with pytest.raises(ScramProtocolError, match="out of order"):
        ex.server_first(Client("s").first())
