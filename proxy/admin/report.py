"""`dpproxy report --out FILE.html`: one self-contained page (inline SVG, no scripts, no
network): every analyst's ε and δ spent and left, then per analyst ε spent over time,
queries per day and refusals by reason."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, date, datetime
from html import escape
from pathlib import Path

from accountant import AuditRecord, AuditVerification, Decision, StoredAnalyst, format_delta
from proxy.admin.common import CommandError, open_reader, parse_time
from proxy.settings import Settings

WIDTH, HEIGHT, PAD = 640, 200, 44
REFUSED = (Decision.REJECTED, Decision.OVER_BUDGET, Decision.ERROR)
CHARGED = (Decision.ACCEPTED, Decision.FAILED)
RESET_PREFIX = "spending reset"
COLORS = {"answered": "#2b7bb9", "failed": "#e39d2d", "refused": "#c8453c"}

STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2rem auto;max-width:760px;
color:#222;line-height:1.4}
h1{font-size:1.5rem}h2{font-size:1.2rem;margin-top:2.2rem;border-bottom:1px solid #ddd}
h3{font-size:1rem;margin:1.2rem 0 .3rem}
table{border-collapse:collapse;margin:.4rem 0;font-size:.9rem}
td,th{padding:.2rem .6rem;border-bottom:1px solid #eee;text-align:left}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
.muted{color:#777;font-size:.85rem}.bad{color:#c8453c;font-weight:bold}.ok{color:#2d7d46}
svg text{font-size:11px;fill:#555}
"""


@dataclass(frozen=True)
class Period:
    since: datetime | None
    until: datetime | None


def report(settings: Settings, args: argparse.Namespace, command: str) -> int:
    out: Path = args.out
    period = Period(
        None if args.since is None else parse_time(args.since),
        None if args.until is None else parse_time(args.until),
    )
    with open_reader(settings, command) as store:
        analysts = store.analysts()
        records = store.audit_records(since=period.since, until=period.until)
        verification = store.verify_audit()
    if args.analyst is not None:
        analysts = [a for a in analysts if a.name == args.analyst]
        if not analysts:
            raise CommandError(f'no analyst "{args.analyst}"; `dpproxy analyst list` shows them')
    page = render_page(analysts, records, verification, settings.state.describe(), period)
    try:
        out.write_text(page, encoding="utf-8")
    except OSError as error:
        raise CommandError(f"{out}: cannot write: {error.strerror}") from None
    print(f"wrote {out} ({len(analysts)} analysts, {len(records)} audit records)", file=sys.stderr)
    return 0


def render_page(
    analysts: list[StoredAnalyst],
    records: list[AuditRecord],
    verification: AuditVerification,
    source: str,
    period: Period,
) -> str:
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    chain = (
        f'<span class="ok">intact ({verification.records} records verified)</span>'
        if verification.intact
        else f'<span class="bad">BROKEN at record {verification.first_bad_id}: '
        f"{escape(verification.problem or '')}</span>"
    )
    shown = "all time"
    if period.since or period.until:
        shown = f"{_day(period.since) if period.since else '…'} to "
        shown += _day(period.until) if period.until else "now"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>dpproxy report {escape(now)}</title><style>{STYLE}</style></head><body>",
        "<h1>dpproxy privacy budget report</h1>",
        f'<p class="muted">Generated {escape(now)} from {escape(source)}; period: '
        f"{escape(shown)}. Audit hash chain: {chain}</p>",
        _overview(analysts),
    ]
    for analyst in analysts:
        own = [r for r in records if r.analyst == analyst.name]
        parts.append(_analyst_section(analyst, own))
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _overview(analysts: list[StoredAnalyst]) -> str:
    if not analysts:
        return "<p>No analysts yet.</p>"
    rows = "".join(
        f"<tr><td>{escape(a.name)}</td><td class=n>{a.budget.total.plain}</td>"
        f"<td class=n>{a.spent.plain}</td><td class=n>{a.remaining.plain}</td>"
        f"<td class=n>{_percent(a)}</td><td class=n>{format_delta(a.budget.delta)}</td>"
        f"<td class=n>{format_delta(a.delta_spent)}</td>"
        f"<td class=n>{format_delta(a.delta_remaining)}</td></tr>"
        for a in analysts
    )
    return (
        "<table><tr><th>analyst</th><th class=n>ε total</th><th class=n>ε spent</th>"
        "<th class=n>ε left</th><th class=n>used</th><th class=n>δ</th>"
        f"<th class=n>δ spent</th><th class=n>δ left</th></tr>{rows}</table>"
    )


def _percent(analyst: StoredAnalyst) -> str:
    return f"{100 * float(analyst.spent) / float(analyst.budget.total):.0f}%"


def _analyst_section(analyst: StoredAnalyst, records: list[AuditRecord]) -> str:
    queries = [r for r in records if r.decision in (*CHARGED, *REFUSED)]
    return "\n".join(
        [
            f"<h2>{escape(analyst.name)}</h2>",
            f"<p>{analyst.spent.plain} of ε {analyst.budget.total.plain} spent, "
            f"{analyst.remaining.plain} left; {len(queries)} queries in this period.</p>",
            "<h3>Budget spent over time</h3>",
            _spending_chart(analyst, records),
            "<h3>Queries per day</h3>",
            _daily_chart(queries),
            "<h3>Refusals by reason</h3>",
            _refusals(queries),
        ]
    )


def _spending_chart(analyst: StoredAnalyst, records: list[AuditRecord]) -> str:
    points: list[tuple[datetime, float]] = []
    spent = 0.0
    for record in records:
        if record.decision in CHARGED and record.rho and record.remaining is not None:
            # ρ charges do not add up as ε: what is left after the charge says what is spent.
            spent = float(analyst.budget.total) - float(record.remaining)
        elif record.decision in CHARGED:
            spent += float(record.epsilon)
        elif record.decision is Decision.ADMIN and (record.reason or "").startswith(RESET_PREFIX):
            spent = 0.0
        else:
            continue
        points.append((record.time, spent))
    if not points:
        return '<p class="muted">Nothing charged in this period.</p>'
    total = float(analyst.budget.total)
    top = max(total, *(v for _, v in points)) * 1.05 or 1.0
    start, end = points[0][0], points[-1][0]
    span = max((end - start).total_seconds(), 1.0)

    def x(when: datetime) -> float:
        return PAD + (WIDTH - 2 * PAD) * (when - start).total_seconds() / span

    def y(value: float) -> float:
        return HEIGHT - PAD + -(HEIGHT - 2 * PAD) * value / top

    path = [f"M{PAD:.1f},{y(0):.1f}"]
    for when, value in points:
        path.append(f"H{x(when):.1f}V{y(value):.1f}")
    path.append(f"H{WIDTH - PAD:.1f}")
    return _svg(
        f"ε spent by {analyst.name} over time",
        [
            _axes(),
            f'<line x1="{PAD}" x2="{WIDTH - PAD}" y1="{y(total):.1f}" y2="{y(total):.1f}" '
            'stroke="#c8453c" stroke-dasharray="5,4"/>',
            f'<text x="{WIDTH - PAD}" y="{y(total) - 4:.1f}" text-anchor="end">'
            f"budget ε {escape(analyst.budget.total.plain)}</text>",
            f'<path d="{"".join(path)}" fill="none" stroke="{COLORS["answered"]}" '
            'stroke-width="2"/>',
            f'<text x="{PAD - 6}" y="{y(0):.1f}" text-anchor="end">0</text>',
            f'<text x="{PAD - 6}" y="{y(top / 1.05):.1f}" text-anchor="end">'
            f"{top / 1.05:.3g}</text>",
            f'<text x="{PAD}" y="{HEIGHT - PAD + 16}">{_minute(start)}</text>',
            f'<text x="{WIDTH - PAD}" y="{HEIGHT - PAD + 16}" text-anchor="end">'
            f"{_minute(end)}</text>",
            f'<text x="{PAD}" y="{PAD - 14}">cumulative ε (since the last reset)</text>',
        ],
    )


def _daily_chart(queries: list[AuditRecord]) -> str:
    if not queries:
        return '<p class="muted">No queries in this period.</p>'
    days: dict[date, Counter[str]] = {}
    for record in queries:
        kind = "answered" if record.decision is Decision.ACCEPTED else "failed"
        if record.decision in REFUSED:
            kind = "refused"
        days.setdefault(record.started_at.astimezone(UTC).date(), Counter())[kind] += 1
    ordered = sorted(days)
    most = max(sum(c.values()) for c in days.values())
    slot = (WIDTH - 2 * PAD) / len(ordered)
    bar = max(min(slot * 0.7, 48), 2)
    shapes = [_axes()]
    for i, day in enumerate(ordered):
        left = PAD + i * slot + (slot - bar) / 2
        base = float(HEIGHT - PAD)
        for kind in ("answered", "failed", "refused"):
            count = days[day][kind]
            if not count:
                continue
            height = (HEIGHT - 2 * PAD) * count / most
            base -= height
            shapes.append(
                f'<rect x="{left:.1f}" y="{base:.1f}" width="{bar:.1f}" height="{height:.1f}" '
                f'fill="{COLORS[kind]}"><title>{day}: {count} {kind}</title></rect>'
            )
        total = sum(days[day].values())
        shapes.append(
            f'<text x="{left + bar / 2:.1f}" y="{base - 3:.1f}" text-anchor="middle">{total}</text>'
        )
        if len(ordered) <= 12 or i in (0, len(ordered) - 1):
            shapes.append(
                f'<text x="{left + bar / 2:.1f}" y="{HEIGHT - PAD + 16}" '
                f'text-anchor="middle">{day:%m-%d}</text>'
            )
    legend_x = PAD
    for kind, color in COLORS.items():
        shapes.append(
            f'<rect x="{legend_x}" y="{PAD - 24}" width="10" height="10" fill="{color}"/>'
        )
        shapes.append(f'<text x="{legend_x + 14}" y="{PAD - 15}">{kind}</text>')
        legend_x += 90
    return _svg("queries per day", shapes)


def _refusals(queries: list[AuditRecord]) -> str:
    counts = Counter(
        (r.decision.value, r.reason or "(no reason)") for r in queries if r.decision in REFUSED
    )
    if not counts:
        return '<p class="muted">No refusals in this period.</p>'
    rows = "".join(
        f"<tr><td>{escape(decision)}</td><td>{escape(reason)}</td><td class=n>{n}</td></tr>"
        for (decision, reason), n in counts.most_common()
    )
    return f"<table><tr><th>decision</th><th>reason</th><th class=n>count</th></tr>{rows}</table>"


def _svg(label: str, shapes: list[str]) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(label)}">'
        + "".join(shapes)
        + "</svg>"
    )


def _axes() -> str:
    return (
        f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - PAD}" y2="{HEIGHT - PAD}" '
        'stroke="#999"/>'
        f'<line x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{HEIGHT - PAD}" stroke="#999"/>'
    )


def _day(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d")


def _minute(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M")
