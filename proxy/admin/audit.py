"""`dpproxy audit list|show|export|verify`: review the hash-chained audit log.

Each record: time, analyst, client address, SQL as sent, decision and reason, ε charged,
ε remaining, δ charged (partition selection), rows returned, duration; admin changes also
name the OS user (actor).
"""

from __future__ import annotations

import argparse
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

from accountant import AuditRecord, Decision, format_delta
from proxy.admin.common import (
    FORMATS,
    CommandError,
    emit,
    open_reader,
    parse_time,
    printable,
    render,
)
from proxy.settings import Settings

EXIT_BROKEN = 1
#: The largest record id a state store holds (a signed 64-bit integer).
MAX_RECORD_ID = 2**63 - 1
#: What `audit show` prints as it is (the SQL's lines); other control characters are escaped.
_SHOWN_AS_IS = "\n\t"

LIST_COLUMNS = (
    ("id", "id"),
    ("time", "time (UTC)"),
    ("analyst", "analyst"),
    ("client_address", "client"),
    ("decision", "decision"),
    ("epsilon", "ε"),
    ("remaining", "ε left"),
    ("delta", "δ"),
    ("rows", "rows"),
    ("duration_ms", "ms"),
    ("sql", "sql"),
    ("reason", "reason"),
)


def add_filters(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--analyst", help="only this analyst's records")
    parser.add_argument("--since", metavar="TIME", help="records at or after TIME (UTC ISO date)")
    parser.add_argument("--until", metavar="TIME", help="records before TIME (UTC ISO date)")
    parser.add_argument(
        "--decision",
        action="append",
        choices=[d.value for d in Decision],
        help="only records with this decision (repeat for several)",
    )


def add_format(parser: argparse.ArgumentParser, default: str) -> None:
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default=default,
        help=f"table for people; csv, json or jsonl for scripts (default {default})",
    )


def row(record: AuditRecord) -> dict[str, Any]:
    """Every record with the same keys (CSV has one header): ρ and δ are "0" when the
    record has none (nothing charged, or written before the schema had them)."""
    data = {k: v for k, v in record.to_dict().items() if k not in ("rho", "delta")}
    data["rho"] = "0" if record.rho is None else record.rho.plain
    data["delta"] = format_delta(record.delta or Decimal(0))
    data["duration_ms"] = None if record.duration_ms is None else round(record.duration_ms, 3)
    return data


def _table_row(record: AuditRecord) -> dict[str, Any]:
    data = row(record)
    data["time"] = data["time"][:19].replace("T", " ")
    if record.actor:
        data["client_address"] = f"{record.actor} (admin)"
    return data


def records(settings: Settings, args: argparse.Namespace, command: str) -> list[AuditRecord]:
    since = None if args.since is None else parse_time(args.since)
    until = None if args.until is None else parse_time(args.until)
    decisions = tuple(Decision(d) for d in args.decision or ())
    with open_reader(settings, command) as store:
        return store.audit_records(
            analyst=args.analyst, since=since, until=until, decisions=decisions
        )


def audit_list(settings: Settings, args: argparse.Namespace, command: str) -> int:
    found = records(settings, args, command)[-args.limit :]
    fmt = "jsonl" if args.json else args.format
    rows = [_table_row(r) if fmt == "table" else row(r) for r in found]
    emit(render(rows, fmt, columns=LIST_COLUMNS, empty="no audit records match"))
    return 0


def audit_show(settings: Settings, args: argparse.Namespace, command: str) -> int:
    missing = f"no audit record {args.id}; `dpproxy audit list` shows the ids"
    if args.id > MAX_RECORD_ID:
        raise CommandError(f"{missing} (they are at most {MAX_RECORD_ID})")
    with open_reader(settings, command) as store:
        found = store.audit_records(record_id=args.id)
    if not found:
        raise CommandError(missing)
    data = row(found[0])
    if args.format == "table":
        width = max(len(k) for k in data)
        emit(
            "\n".join(
                f"{k.ljust(width)}  {'' if v is None else printable(str(v), keep=_SHOWN_AS_IS)}"
                for k, v in data.items()
            )
        )
    else:
        emit(render([data], args.format, columns=LIST_COLUMNS, empty=""))
    return 0


def audit_export(settings: Settings, args: argparse.Namespace, command: str) -> int:
    found = records(settings, args, command)
    text = render([row(r) for r in found], args.format, columns=LIST_COLUMNS, empty="")
    if args.out is None:
        emit(text)
        return 0
    out: Path = args.out
    try:
        out.write_text(text + "\n" if text else "", encoding="utf-8")
    except OSError as error:
        raise CommandError(f"{out}: cannot write: {error.strerror}") from None
    print(f"wrote {len(found)} audit records to {out} ({args.format})", file=sys.stderr)
    return 0


def audit_verify(settings: Settings, args: argparse.Namespace, command: str) -> int:
    with open_reader(settings, command) as store:
        result = store.verify_audit()
    if result.intact:
        print(f"audit log intact: {result.records} records, hash chain verified")
        return 0
    print(
        f"audit log BROKEN at record {result.first_bad_id}: {result.problem} "
        f"({result.records} records verified before it, {result.expected_records} expected)"
    )
    return EXIT_BROKEN
