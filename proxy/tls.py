"""TLS for client connections: the server's SSL context from a certificate and a key."""

from __future__ import annotations

import ssl
from pathlib import Path


class TLSConfigError(Exception):
    """The certificate or key cannot be used; the message names the file and the fix."""


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    """A server-side context (TLS 1.2 or newer) presenting ``cert`` with ``key``.

    Clients are not asked for certificates: they authenticate with SCRAM-SHA-256 inside
    the encrypted connection.
    """
    for what, path in (("tls_cert", cert), ("tls_key", key)):
        if not path.is_file():
            raise TLSConfigError(f"[server] {what}: {path} does not exist or is not a file")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(certfile=str(cert), keyfile=str(key))
    except ssl.SSLError as error:
        raise TLSConfigError(
            f"[server] tls_cert {cert} and tls_key {key} cannot be used together: "
            f"{error.reason or error}; give a PEM certificate and its unencrypted PEM key"
        ) from None
    except OSError as error:
        raise TLSConfigError(f"cannot read {cert} or {key}: {error.strerror}") from None
    return context
