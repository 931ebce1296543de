"""The `dpproxy` command: serve, demo, passwd, and the admin commands (proxy.admin)."""

from __future__ import annotations

import argparse
import errno
import logging
import os
import shlex
import socket
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from accountant import AccountantError, StateStoreError
from proxy import __version__
from proxy.admin.common import CommandError, UsageError, read_password, until_reader_leaves
from proxy.admin.parser import add_admin_commands
from proxy.backend_error import BackendError
from proxy.demo_defaults import CONFIG_FILE, DEFAULT_SEED, MAX_PATIENTS
from proxy.protocol.scram import make_verifier
from proxy.settings import (
    CONFIG_ENV,
    ConfigError,
    Settings,
    config_path,
    host_problem,
    host_syntax_problem,
    load_settings,
)
from rewriter.errors import PolicyError

EXIT_USAGE = 2
EXIT_FAILURE = 1


LOG_LEVELS = ("debug", "info", "warning", "error")


def build_parser() -> argparse.ArgumentParser:
    # --log-level goes before the command or after it (`dpproxy serve --log-level debug`):
    # after it, its default is left out so that one given before is kept.
    logs = argparse.ArgumentParser(add_help=False)
    logs.add_argument(
        "--log-level",
        default=argparse.SUPPRESS,
        choices=LOG_LEVELS,
        help="how much the server logs to stderr (default: info)",
    )
    common = argparse.ArgumentParser(add_help=False, parents=[logs])
    common.add_argument(
        "--config",
        metavar="FILE",
        help=f"configuration file (default: ${CONFIG_ENV}, else ./{CONFIG_FILE})",
    )
    parser = argparse.ArgumentParser(
        prog="dpproxy",
        description="A differentially private SQL proxy for PostgreSQL clients.",
    )
    parser.add_argument("--version", action="version", version=f"dpproxy {__version__}")
    parser.add_argument(
        "--log-level",
        default="info",
        choices=LOG_LEVELS,
        help="how much the server logs to stderr (default: info); also after the command",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    serve = commands.add_parser(
        "serve",
        parents=[common],
        help="serve the configured database",
        description="Serve the database named in the configuration.",
    )
    serve.add_argument("--host", help="address to listen on (overrides [server] host)")
    serve.add_argument("--port", type=_port, help="port to listen on (overrides [server] port)")

    demo = commands.add_parser(
        "demo",
        parents=[logs],
        help="create and serve the embedded demo database",
        description=(
            "Write a synthetic medical database (DuckDB), a commented configuration and the "
            "state store into DIR, then serve it. An existing demo in DIR is reused as it "
            "is, never rewritten: --patients, --seed and --postgres/--schema must then agree "
            "with it (for a new demo, give another --dir)."
        ),
    )
    demo.add_argument(
        "--dir",
        default="dpproxy-demo",
        type=Path,
        help="where the demo lives (default: ./dpproxy-demo)",
    )
    demo.add_argument("--host", default="127.0.0.1", help="address to listen on")
    demo.add_argument("--port", type=_port, default=6432, help="port (default 6432; 0: any)")
    # --patients, --seed and --postgres apply to a new demo; on an existing one they must
    # agree with it (None: not given).
    demo.add_argument(
        "--patients",
        type=_patients,
        help="patients to generate for a new demo (default 10,000)",
    )
    demo.add_argument(
        "--seed",
        type=int,
        help=f"random seed of a new demo's data (default {DEFAULT_SEED})",
    )
    demo.add_argument(
        "--postgres",
        metavar="DSN",
        help="load the demo data into this PostgreSQL database and serve it from there",
    )
    demo.add_argument(
        "--schema",
        default="public",
        action=_Given,
        help="PostgreSQL schema for --postgres (default public); only with --postgres",
    )
    demo.add_argument(
        "--no-serve",
        action="store_true",
        help="only create the demo (and load --postgres), then exit",
    )

    add_admin_commands(commands, common)

    commands.add_parser(
        "passwd",
        parents=[logs],
        help="make a password verifier for the configuration",
        description=(
            "Read a password (prompt, or one line on standard input) and print the "
            "SCRAM-SHA-256 verifier to put in [analysts.NAME] password."
        ),
    )
    return parser


class _Given(argparse.Action):
    """Stores the value and notes that the option was given (``<dest>_given``)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[object] | None,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, values)
        setattr(namespace, f"{self.dest}_given", True)


def _port(text: str) -> int:
    value = _integer(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port must be between 0 and 65535, got {value}")
    return value


def _patients(text: str) -> int:
    value = _integer(text)
    if not 1 <= value <= MAX_PATIENTS:
        raise argparse.ArgumentTypeError(f"patients must be between 1 and {MAX_PATIENTS:,}")
    return value


def _integer(text: str) -> int:
    try:
        return int(text.replace("_", "").replace(",", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    given = sys.argv[1:] if argv is None else argv
    try:
        if _serves(args):
            return _dispatch(args, given)
        return until_reader_leaves(lambda: _dispatch(args, given))
    except (ConfigError, CommandError, PolicyError, BackendError) as error:
        print(f"dpproxy: {error}", file=sys.stderr)
        return EXIT_USAGE if isinstance(error, ConfigError | UsageError) else EXIT_FAILURE
    except AccountantError as error:
        # A command that ends (or a server that stopped) does not retry: no error.later.
        text = error.describe() if isinstance(error, StateStoreError) else str(error)
        print(f"dpproxy: {text}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        return 130


def _serves(args: argparse.Namespace) -> bool:
    """Whether the command runs the server, which prints a line or a banner and goes on
    serving: not a command whose output a reader may cut short (until_reader_leaves)."""
    return args.command == "serve" or (args.command == "demo" and not args.no_serve)


def _dispatch(args: argparse.Namespace, argv: Sequence[str]) -> int:
    if args.command == "serve":
        if args.host is not None:
            _check_host_syntax(args.host)
        settings = load_settings(config_path(args.config))
        server = settings.server.model_copy(
            update={k: v for k, v in (("host", args.host), ("port", args.port)) if v is not None}
        )
        settings = settings.model_copy(update={"server": server})
        # Before the state store is opened (and seeded, and audited): a failed start
        # leaves nothing behind.
        _check_listen(server.host, server.port, options="[server] host and port, or --host/--port")
        _serve(settings, banner=None)
        return 0
    if args.command == "demo":
        # Deferred, as the server's modules are: the demo's data generator imports numpy,
        # DuckDB and psycopg, which the admin commands need not pay.
        from proxy.demo import PostgresTarget, prepare  # noqa: PLC0415

        directory: Path = args.dir
        if getattr(args, "schema_given", False) and args.postgres is None:
            raise UsageError(
                f"--schema {args.schema} applies only with --postgres DSN (the PostgreSQL schema "
                "to load the demo into); add --postgres, or leave --schema out for the DuckDB demo"
            )
        _check_host(args.host)  # before writing it into the demo's configuration
        if not args.no_serve:  # before spending time on the data
            _check_listen(args.host, args.port, options="--host and --port")
        prepare(
            directory,
            host=args.host,
            port=args.port,
            patients=args.patients,
            seed=args.seed,
            postgres=None if args.postgres is None else PostgresTarget(args.postgres, args.schema),
        )
        if args.no_serve:
            print(
                f"demo ready in {directory}; serve it with `dpproxy serve --config "
                f"{directory / CONFIG_FILE}`"
            )
            return 0
        settings = load_settings(directory / CONFIG_FILE)
        server = settings.server.model_copy(update={"host": args.host, "port": args.port})
        _serve(settings.model_copy(update={"server": server}), banner=directory)
        return 0
    if args.command == "passwd":
        print(make_verifier(read_password()))
        return 0
    handler: Callable[..., int] = args.handler
    if not getattr(args, "needs_settings", True):
        return handler(args)
    settings = load_settings(config_path(args.config))
    return handler(settings, args, shlex.join(["dpproxy", *argv]))


def _check_host(host: str) -> None:
    """Refuse a --host that is neither an address nor a name this machine resolves."""
    problem = host_problem(host)
    if problem is not None:
        raise UsageError(f"--host {problem}")


def _check_host_syntax(host: str) -> None:
    """Refuse a --host that cannot be an address or a name at all (no lookup: the server
    reports a name it cannot resolve when it starts to listen)."""
    problem = host_syntax_problem(host)
    if problem is not None:
        raise UsageError(f"--host {problem}")


def _check_listen(host: str, port: int, *, options: str) -> None:
    """Refuse ``host``:``port`` unless the server can listen there: resolve it and bind a
    socket to each of its addresses as asyncio.start_server does, then close them again.
    ``options`` names where the address is set, for the message."""
    try:
        addresses = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as error:
        reason = error.strerror or str(error)
    except ValueError as error:  # a NUL character, or a name IDNA refuses (UnicodeError)
        reason = str(error)
    else:
        for family, kind, protocol, _, address in dict.fromkeys(addresses):
            try:
                probe = socket.socket(family, kind, protocol)
            except OSError:
                continue  # a family this machine lacks: the server skips it too
            with probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                try:
                    probe.bind(address)
                except OSError as error:
                    raise ConfigError(_bind_problem(host, port, error, options)) from None
        return
    raise ConfigError(
        f"cannot listen on {host}: {reason}; it is neither an address nor a name this machine "
        "can resolve: give an address such as 127.0.0.1, or 0.0.0.0 for every interface "
        f"({options})"
    )


def _bind_problem(host: str, port: int, error: OSError, options: str) -> str:
    reason = os.strerror(error.errno) if error.errno else str(error)
    if error.errno == errno.EADDRINUSE:
        fix = "stop what is using it, or choose another port"
    elif error.errno == errno.EADDRNOTAVAIL:
        fix = (
            f"{host} is not an address of this machine: give one of its addresses, "
            "127.0.0.1, or 0.0.0.0 for every interface"
        )
    elif error.errno in (errno.EACCES, errno.EPERM) and 0 < port < 1024:
        fix = "ports below 1024 need privileges: choose a port from 1024 up"
    else:
        fix = "choose another address"
    return f"cannot listen on {host}:{port}: {reason}; {fix} ({options})"


def _serve(settings: Settings, banner: Path | None) -> None:
    # Deferred: the server's modules take a third of a second to import, which the admin
    # commands need not pay.
    from proxy.demo import connection_banner, served_database  # noqa: PLC0415
    from proxy.runner import run  # noqa: PLC0415
    from proxy.server import run_event_loop  # noqa: PLC0415

    served = served_database(settings.backend)
    started = False

    def ready(port: int) -> None:
        nonlocal started
        started = True
        if banner is not None:
            print(connection_banner(banner, served, settings.server.host, port), flush=True)
        else:
            print(f"dpproxy listening on {settings.server.host}:{port}", flush=True)

    try:
        run_event_loop(run(settings, ready))
    except StateStoreError as error:
        if started:
            raise
        # Not what a running server does about it next (error.later): it did not start.
        raise CommandError(f"the server did not start: {error.describe()}") from None


if __name__ == "__main__":
    sys.exit(main())
