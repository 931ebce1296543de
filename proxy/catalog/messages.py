"""What the server and the catalog engine's process tell each other, over a pipe each way.

Each message is a frame: its length (8 bytes, big-endian) and the pickled message. Only
the two processes of one dpproxy server read them: the server starts the engine's
process and holds both ends of its pipes (pickle is not for frames of anyone else). A
frame longer than the reader accepts is refused before it is read.
"""

from __future__ import annotations

import pickle
import struct
from dataclasses import dataclass
from typing import Protocol

from proxy.catalog.outputs import CatalogQueryFailed, QueryOutput

_LENGTH = struct.Struct("!Q")


@dataclass(frozen=True)
class TableRows:
    """Rows to insert into ``table``: one tuple of values per row, in ``columns``' order."""

    table: str
    columns: tuple[str, ...]
    rows: tuple[tuple[object, ...], ...]


#: One step of the script that builds the catalog: a statement, or rows to insert.
Step = str | TableRows


@dataclass(frozen=True)
class EngineSetup:
    """The first message to the engine: what to build, and the memory it may use."""

    script: tuple[Step, ...]
    memory_bytes: int


@dataclass(frozen=True)
class Ready:
    """The engine has built the catalog (its first message)."""


@dataclass(frozen=True)
class RunQuery:
    id: int
    sql: str
    zone: str  # the session's TimeZone, as SHOW shows it (datetimes.session_zone)


@dataclass(frozen=True)
class CancelQuery:
    id: int


@dataclass(frozen=True)
class QueryReply:
    id: int
    output: QueryOutput | None
    error: CatalogQueryFailed | None


class Reader(Protocol):
    """A pipe's reading end (io.FileIO)."""

    def readinto(self, buffer: memoryview, /) -> int | None: ...


class Writer(Protocol):
    """A pipe's writing end (io.FileIO)."""

    def write(self, data: memoryview, /) -> int | None: ...


class FrameTooLarge(Exception):
    """A frame longer than the reader accepts."""


def encode(message: object) -> bytes:
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _LENGTH.pack(len(payload)) + payload


def write_frame(stream: Writer, frame: bytes) -> None:
    """Write a frame (``encode``) whole; raises OSError (BrokenPipeError) if the other
    process has gone."""
    view = memoryview(frame)
    while view:
        written = stream.write(view)
        if written is None:  # not reached: the pipe blocks
            raise BlockingIOError("the pipe did not take the frame")
        view = view[written:]


def read_frame(stream: Reader, max_bytes: int) -> object | None:
    """The next message, or None at the end of the stream. Raises FrameTooLarge for a
    frame longer than ``max_bytes`` (nothing more can be read), EOFError for a frame cut
    short."""
    header = _read_exactly(stream, _LENGTH.size)
    if header is None:
        return None
    (length,) = _LENGTH.unpack(header)
    if length > max_bytes:
        raise FrameTooLarge(f"a frame of {length} bytes (at most {max_bytes})")
    payload = _read_exactly(stream, length)
    if payload is None:
        raise EOFError("the stream ended inside a frame")
    # The frames come from this server's own engine process (see the module's docstring).
    message: object = pickle.loads(payload)  # noqa: S301
    return message


def _read_exactly(stream: Reader, length: int) -> bytearray | None:
    """``length`` bytes; None if the stream ends before the first, EOFError after it."""
    buffer = bytearray(length)
    view = memoryview(buffer)
    got = 0
    while got < length:
        count = stream.readinto(view[got:])
        if not count:
            if got == 0:
                return None
            raise EOFError("the stream ended inside a frame")
        got += count
    return buffer
