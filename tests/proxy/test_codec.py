"""The wire codec: frontend decoding (round trips, errors, fuzzing) and backend encoding."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.protocol import codec
from proxy.protocol.codec import FrontendDecoder, ProtocolViolation
from proxy.protocol.messages import (
    CANCEL_REQUEST_CODE,
    GSSENC_REQUEST_CODE,
    PROTOCOL_3_0,
    SSL_REQUEST_CODE,
    AuthStage,
    Bind,
    CancelRequest,
    Close,
    Describe,
    Execute,
    Flush,
    FrontendMessage,
    GSSENCRequest,
    InvalidEncoding,
    OtherMessage,
    Parse,
    PasswordMessage,
    Query,
    SASLInitialResponse,
    SASLResponse,
    SSLRequest,
    StartupMessage,
    Sync,
    Terminate,
)
from proxy.protocol.states import ConnectionState, IllegalTransition, transition

# --- a frontend encoder, written independently of the decoder ---


def cstr(s: str) -> bytes:
    return s.encode() + b"\x00"


def typed(t: bytes, body: bytes) -> bytes:
    return t + struct.pack("!i", len(body) + 4) + body


def untyped(body: bytes) -> bytes:
    return struct.pack("!i", len(body) + 4) + body


def encode(msg: FrontendMessage) -> bytes:
    match msg:
        case SSLRequest():
            return untyped(struct.pack("!i", SSL_REQUEST_CODE))
        case GSSENCRequest():
            return untyped(struct.pack("!i", GSSENC_REQUEST_CODE))
        case CancelRequest(pid, secret):
            return untyped(struct.pack("!iiI", CANCEL_REQUEST_CODE, pid, secret))
        case StartupMessage(protocol, params):
            body = b"".join(cstr(k) + cstr(v) for k, v in params) + b"\x00"
            return untyped(struct.pack("!i", protocol) + body)
        case Query(sql):
            return typed(b"Q", cstr(sql))
        case Terminate():
            return typed(b"X", b"")
        case Sync():
            return typed(b"S", b"")
        case Flush():
            return typed(b"H", b"")
        case Parse(name, query, types):
            body = cstr(name) + cstr(query) + struct.pack("!h", len(types))
            return typed(b"P", body + b"".join(struct.pack("!I", t) for t in types))
        case Bind(portal, stmt, formats, params, result_formats):
            body = cstr(portal) + cstr(stmt) + struct.pack("!h", len(formats))
            body += b"".join(struct.pack("!h", f) for f in formats)
            body += struct.pack("!h", len(params))
            for p in params:
                body += struct.pack("!i", -1) if p is None else struct.pack("!i", len(p)) + p
            body += struct.pack("!h", len(result_formats))
            body += b"".join(struct.pack("!h", f) for f in result_formats)
            return typed(b"B", body)
        case Describe(kind, name):
            return typed(b"D", kind.encode() + cstr(name))
        case Close(kind, name):
            return typed(b"C", kind.encode() + cstr(name))
        case Execute(portal, max_rows):
            return typed(b"E", cstr(portal) + struct.pack("!i", max_rows))
        case PasswordMessage(password):
            return typed(b"p", cstr(password))
        case SASLInitialResponse(mech, data):
            n = -1 if data is None else len(data)
            return typed(b"p", cstr(mech) + struct.pack("!i", n) + (data or b""))
        case SASLResponse(data):
            return typed(b"p", data)
        case OtherMessage(t, payload):
            return typed(t, payload)
    raise AssertionError(msg)


# --- strategies ---

text = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"))
name = text.filter(bool)
i16 = st.integers(-(2**15), 2**15 - 1)
i32 = st.integers(-(2**31), 2**31 - 1)
u32 = st.integers(0, 2**32 - 1)

regular_messages = st.one_of(
    st.builds(Query, text),
    st.just(Terminate()),
    st.just(Sync()),
    st.just(Flush()),
    st.builds(Parse, text, text, st.lists(u32, max_size=5).map(tuple)),
    st.builds(
        Bind,
        text,
        text,
        st.lists(i16, max_size=4).map(tuple),
        st.lists(st.one_of(st.none(), st.binary(max_size=20)), max_size=4).map(tuple),
        st.lists(i16, max_size=4).map(tuple),
    ),
    st.builds(Describe, st.sampled_from("SP"), text),
    st.builds(Close, st.sampled_from("SP"), text),
    st.builds(Execute, text, i32),
    st.builds(OtherMessage, st.sampled_from([b"d", b"c", b"f", b"F"]), st.binary(max_size=30)),
)
startup_messages = st.builds(
    StartupMessage,
    st.integers(0, 5).map(lambda minor: PROTOCOL_3_0 | minor),
    st.lists(st.tuples(name, text), max_size=5).map(tuple),
).filter(lambda m: len(encode(m)) <= codec.MAX_STARTUP_PACKET_SIZE)


def feed_in_pieces(decoder: FrontendDecoder, data: bytes, cuts: list[int]) -> list[FrontendMessage]:
    out: list[FrontendMessage] = []
    prev = 0
    for cut in sorted(c % (len(data) + 1) for c in cuts) + [len(data)]:
        out += decoder.feed(data[prev:cut])
        prev = cut
    return out


# --- round trips ---


@given(st.lists(regular_messages, max_size=8), st.lists(st.integers(0, 10_000), max_size=6))
def test_regular_messages_round_trip_at_any_split(
    msgs: list[FrontendMessage], cuts: list[int]
) -> None:
    data = b"".join(encode(m) for m in msgs)
    decoder = FrontendDecoder(startup=False)
    assert feed_in_pieces(decoder, data, cuts) == msgs
    assert decoder.buffered == 0


@given(startup_messages, st.lists(st.integers(0, 1000), max_size=4))
def test_startup_round_trip_switches_phase(msg: StartupMessage, cuts: list[int]) -> None:
    data = encode(SSLRequest()) + encode(msg) + encode(Query("select 1"))
    decoder = FrontendDecoder()
    assert decoder.in_startup_phase
    assert feed_in_pieces(decoder, data, cuts) == [SSLRequest(), msg, Query("select 1")]
    assert not decoder.in_startup_phase


def test_startup_parameters() -> None:
    msg = StartupMessage(PROTOCOL_3_0, (("user", "alice"), ("database", "demo")))
    [decoded] = FrontendDecoder().feed(encode(msg))
    assert isinstance(decoded, StartupMessage)
    assert decoded.params == {"user": "alice", "database": "demo"}
    assert (decoded.major, decoded.minor) == (3, 0)


def test_cancel_and_gssenc_requests() -> None:
    data = encode(GSSENCRequest()) + encode(CancelRequest(1234, 2**32 - 1))
    assert FrontendDecoder().feed(data) == [GSSENCRequest(), CancelRequest(1234, 2**32 - 1)]


@pytest.mark.parametrize(
    ("stage", "msg"),
    [
        (AuthStage.PASSWORD, PasswordMessage("s3cret")),
        (AuthStage.SASL_INITIAL, SASLInitialResponse("SCRAM-SHA-256", b"n,,n=,r=abc")),
        (AuthStage.SASL_INITIAL, SASLInitialResponse("SCRAM-SHA-256", None)),
        (AuthStage.SASL_CONTINUE, SASLResponse(b"c=biws,r=abc,p=xyz")),
    ],
)
def test_password_messages_follow_auth_stage(stage: AuthStage, msg: FrontendMessage) -> None:
    decoder = FrontendDecoder(startup=False)
    decoder.auth_stage = stage
    assert decoder.feed(encode(msg)) == [msg]


def test_password_message_without_auth_is_a_violation() -> None:
    with pytest.raises(ProtocolViolation, match="no authentication in progress"):
        FrontendDecoder(startup=False).feed(typed(b"p", b"x\x00"))


# --- errors ---


@pytest.mark.parametrize(
    ("data", "match"),
    [
        # Text that is not UTF-8 in a message that is malformed anyway: still a violation.
        (typed(b"P", b"\xff\x00q\x00\x00"), "truncated"),
        (typed(b"p", b"\xff\x00"), "no authentication in progress"),
        (b"Q" + struct.pack("!i", 3), "invalid message length"),
        (b"Q" + struct.pack("!i", -5), "invalid message length"),
        (b"Q" + struct.pack("!i", 2**31 - 1), "exceeds the maximum"),
        (b"z\x00\x00\x00\x04", "invalid frontend message type"),
        (b"\x00", "invalid frontend message type"),
        (typed(b"X", b"x"), "trailing bytes"),
        (typed(b"D", b"Xname\x00"), "unknown target"),
        (typed(b"E", b"portal\x00\x00\x00"), "truncated"),
        (typed(b"P", b"s\x00q\x00" + struct.pack("!h", -1)), "negative"),
        (typed(b"B", b"\x00\x00\x00\x00\x00\x01" + struct.pack("!i", 100)), "exceeds the message"),
    ],
)
def test_regular_phase_errors(data: bytes, match: str) -> None:
    decoder = FrontendDecoder(startup=False)
    with pytest.raises(ProtocolViolation, match=match):
        decoder.feed(data)
    # A broken stream stays broken.
    with pytest.raises(ProtocolViolation):
        decoder.feed(encode(Sync()))


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (struct.pack("!ii", 8, 2 << 16), r"unsupported frontend protocol 2\.0"),
        (struct.pack("!ii", 8, 1234), "unsupported frontend protocol"),
        (struct.pack("!i", 4), "invalid length of startup packet"),
        (struct.pack("!i", -1), "invalid length of startup packet"),
        (struct.pack("!i", 1_000_000), "invalid length of startup packet"),
        (untyped(struct.pack("!i", PROTOCOL_3_0) + b"user\x00alice"), "terminator"),
        (untyped(struct.pack("!i", PROTOCOL_3_0) + b"user\x00\x00"), "NUL terminator"),
        (untyped(struct.pack("!i", PROTOCOL_3_0) + b"\x00\x00"), "empty parameter name"),
        (untyped(struct.pack("!ii", CANCEL_REQUEST_CODE, 1)), "exactly 16 bytes"),
        (untyped(struct.pack("!ii", SSL_REQUEST_CODE, 1)), "trailing bytes"),
        (untyped(struct.pack("!i", PROTOCOL_3_0) + b"user\x00\xff\x00\x00"), "UTF-8"),
    ],
)
def test_startup_phase_errors(data: bytes, match: str) -> None:
    with pytest.raises(ProtocolViolation, match=match):
        FrontendDecoder().feed(data)


def bad_utf8(shown: str) -> str:
    return f'invalid byte sequence for encoding "UTF8": {shown}'


@pytest.mark.parametrize(
    ("data", "type_byte", "shown"),
    [
        (typed(b"Q", b"SELECT \xff\xfe\x00"), b"Q", "0xff"),
        (typed(b"Q", b"SELECT '\xc3\x28'\x00"), b"Q", "0xc3 0x28"),
        (typed(b"Q", b"SELECT '\xed\xa0\x80'\x00"), b"Q", "0xed 0xa0 0x80"),  # a surrogate
        (typed(b"P", b"\xff\x00SELECT 1\x00\x00\x00"), b"P", "0xff"),
        (typed(b"P", b"s\x00SELECT '\xe2\x82'\x00\x00\x00"), b"P", "0xe2 0x82 0x27"),
        (typed(b"P", b"s\x00SELECT '\xe2\x82\x00\x00\x00"), b"P", "0xe2 0x82"),
        (typed(b"B", b"p\xff\x00\x00" + struct.pack("!hhh", 0, 0, 0)), b"B", "0xff"),
        (typed(b"B", b"\x00s\xf0\x00" + struct.pack("!hhh", 0, 0, 0)), b"B", "0xf0"),
        (typed(b"D", b"S\xff\x00"), b"D", "0xff"),
        (typed(b"C", b"P\xfe\x00"), b"C", "0xfe"),
        (typed(b"E", b"\x80\x00" + struct.pack("!i", 0)), b"E", "0x80"),
    ],
)
def test_text_that_is_not_utf8_is_an_error_that_keeps_the_stream(
    data: bytes, type_byte: bytes, shown: str
) -> None:
    # PostgreSQL answers ERROR 22021 and reads on; the old decoder broke the stream.
    decoder = FrontendDecoder(startup=False)
    expected = InvalidEncoding(type_byte, bad_utf8(shown))
    assert decoder.feed(data + encode(Query("SELECT 1"))) == [expected, Query("SELECT 1")]
    assert expected.sqlstate == "22021"


def test_configurable_maximum() -> None:
    decoder = FrontendDecoder(startup=False, max_message_size=100)
    assert decoder.feed(encode(Query("x" * 90))) == [Query("x" * 90)]
    with pytest.raises(ProtocolViolation, match="maximum of 100"):
        # Rejected from the header alone, before the body arrives.
        decoder.feed(b"Q" + struct.pack("!i", 101))


# --- fuzzing ---


@settings(max_examples=500)
@given(
    st.binary(max_size=300),
    st.lists(st.integers(0, 300), max_size=5),
    st.booleans(),
    st.sampled_from(list(AuthStage)),
)
def test_decoder_only_raises_protocol_violation(
    data: bytes, cuts: list[int], startup: bool, stage: AuthStage
) -> None:
    decoder = FrontendDecoder(startup=startup, max_message_size=200)
    decoder.auth_stage = stage
    with contextlib.suppress(ProtocolViolation):
        feed_in_pieces(decoder, data, cuts)


@settings(max_examples=300)
@given(
    st.lists(regular_messages, min_size=1, max_size=6),
    st.integers(0, 10_000),
    st.lists(st.integers(0, 10_000), max_size=4),
)
def test_truncated_stream_yields_only_complete_messages(
    msgs: list[FrontendMessage], cut: int, cuts: list[int]
) -> None:
    frames = [encode(m) for m in msgs]
    data = b"".join(frames)
    cut %= len(data)
    decoder = FrontendDecoder(startup=False)
    got = feed_in_pieces(decoder, data[:cut], cuts)
    complete, size = 0, 0
    for frame in frames:
        if size + len(frame) > cut:
            break
        size += len(frame)
        complete += 1
    assert got == msgs[:complete]
    assert decoder.buffered == cut - size


@given(st.binary(max_size=100), st.binary(min_size=1, max_size=100))
def test_garbage_after_valid_message(prefix_payload: bytes, garbage: bytes) -> None:
    decoder = FrontendDecoder(startup=False)
    data = encode(OtherMessage(b"d", prefix_payload)) + garbage
    try:
        msgs = decoder.feed(data)
    except ProtocolViolation:
        return
    assert msgs[0] == OtherMessage(b"d", prefix_payload)


# --- backend encoders ---


def test_backend_encoders_exact_bytes() -> None:
    assert codec.authentication_ok() == b"R\x00\x00\x00\x08\x00\x00\x00\x00"
    assert codec.ready_for_query(b"I") == b"Z\x00\x00\x00\x05I"
    assert codec.ready_for_query(b"T") == b"Z\x00\x00\x00\x05T"
    assert codec.empty_query_response() == b"I\x00\x00\x00\x04"
    assert codec.parse_complete() == b"1\x00\x00\x00\x04"
    assert codec.bind_complete() == b"2\x00\x00\x00\x04"
    assert codec.close_complete() == b"3\x00\x00\x00\x04"
    assert codec.no_data() == b"n\x00\x00\x00\x04"
    assert codec.portal_suspended() == b"s\x00\x00\x00\x04"
    assert codec.SSL_REFUSED == b"N"
    assert codec.command_complete("SELECT 1") == b"C\x00\x00\x00\x0dSELECT 1\x00"
    assert codec.parameter_status("a", "b") == b"S\x00\x00\x00\x08a\x00b\x00"
    assert codec.backend_key_data(7, 2**32 - 1) == b"K\x00\x00\x00\x0c" + struct.pack(
        "!iI", 7, -1 & 0xFFFFFFFF
    )
    assert codec.authentication_sasl(["SCRAM-SHA-256"]) == (
        b"R\x00\x00\x00\x17\x00\x00\x00\x0aSCRAM-SHA-256\x00\x00"
    )
    assert codec.authentication_sasl_continue(b"r=x") == b"R\x00\x00\x00\x0b\x00\x00\x00\x0br=x"
    assert codec.authentication_sasl_final(b"v=x") == b"R\x00\x00\x00\x0b\x00\x00\x00\x0cv=x"
    assert codec.parameter_description([23, 25]) == b"t\x00\x00\x00\x0e\x00\x02" + struct.pack(
        "!II", 23, 25
    )
    assert codec.negotiate_protocol_version(0, ["_pq_.x"]) == (
        b"v\x00\x00\x00\x13\x00\x00\x00\x00\x00\x00\x00\x01_pq_.x\x00"
    )
    with pytest.raises(ValueError):
        codec.ready_for_query(b"X")


def test_data_row_and_row_description() -> None:
    assert codec.data_row(["1", None, "é"]) == (
        b"D"
        + struct.pack("!ih", 4 + 2 + 4 + 1 + 4 + 4 + 2, 3)
        + struct.pack("!i", 1)
        + b"1"
        + struct.pack("!i", -1)
        + struct.pack("!i", 2)
        + "é".encode()
    )
    assert codec.data_row([]) == b"D\x00\x00\x00\x06\x00\x00"
    desc = codec.row_description([("n", 23, 4, -1)])
    assert desc == b"T" + struct.pack("!ih", 4 + 2 + 2 + 18, 1) + b"n\x00" + struct.pack(
        "!ihIhih", 0, 0, 23, 4, -1, 0
    )


def parse_fields(msg: bytes) -> tuple[bytes, dict[str, str]]:
    (length,) = struct.unpack("!i", msg[1:5])
    assert length == len(msg) - 1
    body = msg[5:]
    assert body.endswith(b"\x00\x00")
    fields = {}
    for part in body[:-2].split(b"\x00"):
        fields[chr(part[0])] = part[1:].decode()
    return msg[:1], fields


def test_error_and_notice_fields() -> None:
    t, fields = parse_fields(
        codec.error_response("42P01", "no table", severity="FATAL", detail="d", hint="h")
    )
    assert t == b"E"
    assert fields == {"S": "FATAL", "V": "FATAL", "C": "42P01", "M": "no table", "D": "d", "H": "h"}
    t, fields = parse_fields(codec.notice_response("hello"))
    assert t == b"N"
    assert fields == {"S": "NOTICE", "V": "NOTICE", "C": "00000", "M": "hello"}


def test_nul_in_text_cannot_break_framing() -> None:
    _, fields = parse_fields(codec.error_response("XX000", "a\x00b"))
    assert fields["M"] == "a\\0b"


# --- connection states ---


def test_state_transitions() -> None:
    s = ConnectionState.AWAITING_STARTUP
    for target in (
        ConnectionState.AUTHENTICATING_SASL_FIRST,
        ConnectionState.AUTHENTICATING_SASL_FINAL,
        ConnectionState.READY,
        ConnectionState.IN_EXTENDED_ERROR,
        ConnectionState.READY,
        ConnectionState.CLOSED,
    ):
        s = transition(s, target)
    assert s is ConnectionState.CLOSED
    with pytest.raises(IllegalTransition):
        transition(ConnectionState.AWAITING_STARTUP, ConnectionState.READY)
    with pytest.raises(IllegalTransition):
        transition(ConnectionState.CLOSED, ConnectionState.READY)
    with pytest.raises(IllegalTransition):
        transition(ConnectionState.AUTHENTICATING_SASL_FIRST, ConnectionState.READY)
