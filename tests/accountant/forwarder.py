"""A TCP forwarder in front of the test PostgreSQL server that can stop answering, as a
hung server, a stalled proxy or a network partition does: the connection stays open (the
kernel acknowledges every packet) but nothing comes back.

- ``pause()``: data in both directions is held (not lost) until ``resume()``.
- ``stall_at_commit(deliver=...)``: the next COMMIT a client sends is delivered to the
  server (or dropped), and from then on that connection is silent both ways (its data is
  dropped): the server committed (or never saw COMMIT), the client never learns which.

A client closing its end still closes the server's end (once the data held before it has
gone through), so the server's session ends as it would when the client's socket is shut.
"""

from __future__ import annotations

import socket
import threading
from contextlib import suppress
from dataclasses import dataclass, field
from types import TracebackType
from typing import Self

from psycopg.conninfo import conninfo_to_dict

#: The COMMIT statement as a client sends it (query strings end with a zero byte).
COMMIT = b"COMMIT\x00"


@dataclass
class _Link:
    client: socket.socket
    server: socket.socket
    silent: bool = False
    open_pipes: int = 2
    lock: threading.Lock = field(default_factory=threading.Lock)


class Forwarder:
    def __init__(self, dsn: str) -> None:
        parts = conninfo_to_dict(dsn)
        self._target = (str(parts.get("host", "127.0.0.1")), int(parts.get("port", 5432)))
        user = parts.get("user", "postgres")
        password = f":{parts['password']}" if parts.get("password") else ""
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self.dsn = f"postgresql://{user}{password}@127.0.0.1:{self.port}/{parts.get('dbname', '')}"
        self._flowing = threading.Event()
        self._flowing.set()
        self._lock = threading.Lock()
        self._links: list[_Link] = []
        self._at_commit: bool | None = None  # None: no stall armed; else deliver it?
        #: Set once a COMMIT stalled its connection.
        self.stalled = threading.Event()
        threading.Thread(target=self._accept, name="forwarder", daemon=True).start()

    def pause(self) -> None:
        self._flowing.clear()

    def resume(self) -> None:
        self._flowing.set()

    def stall_at_commit(self, *, deliver: bool) -> None:
        with self._lock:
            self._at_commit = deliver
            self.stalled.clear()

    def close(self) -> None:
        self._flowing.set()
        with suppress(OSError):
            self._listener.close()
        with self._lock:
            links, self._links = self._links, []
        for link in links:
            for end in (link.client, link.server):
                with suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self._target, timeout=10)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            link = _Link(client, server)
            with self._lock:
                self._links.append(link)
            for source, sink, upstream in ((client, server, True), (server, client, False)):
                threading.Thread(
                    target=self._pipe, args=(link, source, sink, upstream), daemon=True
                ).start()

    def _pipe(
        self, link: _Link, source: socket.socket, sink: socket.socket, upstream: bool
    ) -> None:
        tail = b""  # the end of the chunk before: a COMMIT may come in two chunks
        try:
            while data := source.recv(65536):
                self._flowing.wait()
                # A COMMIT that ends in this chunk (it may have begun in the one before).
                start = max(0, len(tail) - len(COMMIT) + 1)
                ends_here = (tail + data).find(COMMIT, start) >= 0
                tail = (tail + data)[-len(COMMIT) :]
                if upstream and ends_here:
                    with self._lock:
                        deliver, self._at_commit = self._at_commit, None
                    if deliver is not None:
                        # Silent before the COMMIT goes out: else the server's reply could
                        # come back through the other pipe before it saw the flag.
                        link.silent = True
                        if deliver:
                            sink.sendall(data)
                        self.stalled.set()
                        continue
                if not link.silent:
                    sink.sendall(data)
        except OSError:
            pass
        finally:
            with suppress(OSError):
                sink.shutdown(socket.SHUT_WR)
            with link.lock:
                link.open_pipes -= 1
                done = link.open_pipes == 0
            if done:
                link.client.close()
                link.server.close()
                with self._lock, suppress(ValueError):
                    self._links.remove(link)
