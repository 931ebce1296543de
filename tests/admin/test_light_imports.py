"""The commands that plan no query start without the planner's imports.

Importing the planner (sqlglot, numpy, OpenDP), the engines' drivers (DuckDB, psycopg) and
the server took about a second before every ``dpproxy --help``, ``dpproxy budget show``…;
these tests fail if one of those imports comes back on the path of a command that does not
need it. Each runs in a fresh interpreter: this one has imported everything already.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: Modules the admin commands and --help must not import: the planner and what it imports,
#: the engines' drivers, the backends, the demo's generator and the server.
HEAVY = (
    "sqlglot",
    "opendp",
    "numpy",
    "duckdb",
    "psycopg",
    "rewriter.planner",
    "rewriter.plan",
    "rewriter.catalog",
    "proxy.backends",
    "proxy.demo",
    "proxy.demo_data",
    "proxy.runner",
    "proxy.server",
)

# Each command runs in process, as `dpproxy ARGS` does; an exit status other than 0 fails.
_COMMANDS = """
import io, sys
from proxy.cli import main

def dpproxy(*args, stdin=""):
    sys.stdin = io.StringIO(stdin)
    try:
        code = main(list(args))
    except SystemExit as exit_:
        code = exit_.code
    if code != 0:
        raise SystemExit(f"dpproxy {' '.join(args)} exited with {code}")

c = ("--config", CONFIG)
dpproxy("--help")
dpproxy("budget", "show", "--help")
dpproxy("passwd", stdin="s3cret\\n")
dpproxy("config", "check", *c)
dpproxy("config", "schema")
dpproxy("analyst", "list", *c)
dpproxy("analyst", "add", "carol", "--epsilon-total", "2", *c, stdin="pw\\n")
dpproxy("analyst", "passwd", "carol", *c, stdin="pw2\\n")
dpproxy("budget", "show", "--json", *c)
dpproxy("budget", "grant", "carol", "0.5", *c)
dpproxy("budget", "set", "carol", "--epsilon-total", "4", *c)
dpproxy("budget", "reset", "carol", *c)
dpproxy("budget", "global", *c)
dpproxy("analyst", "remove", "carol", *c)
dpproxy("cache", "clear", *c)
dpproxy("audit", "list", *c)
dpproxy("audit", "show", "1", *c)
dpproxy("audit", "export", "--out", OUT + ".jsonl", *c)
dpproxy("audit", "verify", *c)
dpproxy("report", "--out", OUT + ".html", *c)
"""


def _heavy_modules_after(code: str) -> list[str]:
    """The modules of HEAVY a fresh interpreter has imported after running ``code``."""
    script = (
        f"{code}\nimport json, sys\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    loaded: list[str] = json.loads(result.stdout.splitlines()[-1])
    return loaded


def test_importing_the_command_line_imports_no_planner() -> None:
    assert _heavy_modules_after("import proxy.cli") == []


def test_admin_commands_import_no_planner(config: Path, tmp_path: Path) -> None:
    code = f"CONFIG = {str(config)!r}\nOUT = {str(tmp_path / 'out')!r}\n{_COMMANDS}"
    assert _heavy_modules_after(code) == []
    assert (tmp_path / "out.html").exists() and (tmp_path / "out.jsonl").exists()


def test_the_rewriter_package_imports_on_first_use() -> None:
    """``import rewriter.policy`` (the configuration's table policies) is light; the
    package's names are still there, the same objects as in their modules, and
    ``rewriter.plan`` is the planner's function even when the module ``rewriter.plan``
    (the Plan types) was imported first."""
    code = """
import sys
import rewriter.policy
assert "sqlglot" not in sys.modules and "rewriter.planner" not in sys.modules
import rewriter.plan as plans  # binds the name: the function, as before
from rewriter.plan import Plan
import rewriter
from rewriter import plan, Plan as exported_plan, TablePolicy
import rewriter.planner
assert plan is rewriter.planner.plan is rewriter.plan is plans, plan
assert sys.modules["rewriter.plan"].Plan is Plan is exported_plan
assert TablePolicy is rewriter.policy.TablePolicy
names = {}
exec("from rewriter import *", names)
assert set(rewriter.__all__) <= set(names) and set(rewriter.__all__) <= set(dir(rewriter))
assert names["Catalog"] is sys.modules["rewriter.catalog"].Catalog
assert names["OpenDPNoise"] is sys.modules["rewriter.mechanisms"].OpenDPNoise
try:
    rewriter.OutputType
except AttributeError:
    pass
else:
    raise AssertionError("rewriter.OutputType")
"""
    _heavy_modules_after(code)
