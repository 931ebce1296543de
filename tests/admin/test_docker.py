"""docker/compose.yaml and docker/Dockerfile agree with the CLI and the configuration.

No Docker engine runs here: the YAML is parsed, every command is run through the CLI's own
argument parser, and the configuration the seed service writes is loaded."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from proxy import demo
from proxy.cli import build_parser
from proxy.settings import CONFIG_ENV, load_settings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE: dict[str, Any] = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())
DOCKERFILE = (ROOT / "docker" / "Dockerfile").read_text()
SERVICES: dict[str, Any] = COMPOSE["services"]


def command(service: str) -> list[str]:
    value = SERVICES[service]["command"]
    return shlex.split(value) if isinstance(value, str) else [str(v) for v in value]


def parse(argv: list[str]) -> Any:
    assert argv[0] == "dpproxy", argv
    return build_parser().parse_args(argv[1:])


def mounts(service: str) -> dict[str, str]:
    """Volume name -> path in the container."""
    return dict(v.split(":", 1) for v in SERVICES[service].get("volumes", []))


def test_services_and_dependencies() -> None:
    assert set(SERVICES) == {"postgres", "seed", "dpproxy"}
    assert SERVICES["seed"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    depends = SERVICES["dpproxy"]["depends_on"]
    assert depends["seed"]["condition"] == "service_completed_successfully"
    assert SERVICES["seed"]["build"]["dockerfile"] == "docker/Dockerfile"
    assert (ROOT / "docker" / SERVICES["seed"]["build"]["context"] / "pyproject.toml").exists()
    assert SERVICES["seed"]["image"] == SERVICES["dpproxy"]["image"]
    for service in SERVICES.values():
        for volume in service.get("volumes", []):
            assert volume.split(":", 1)[0] in COMPOSE["volumes"]


def test_seed_loads_the_compose_postgres() -> None:
    args = parse(command("seed"))
    assert args.command == "demo" and args.no_serve and args.postgres
    dsn = urlsplit(args.postgres)
    env = SERVICES["postgres"]["environment"]
    assert dsn.hostname == "postgres" and dsn.port == 5432
    assert dsn.username == env["POSTGRES_USER"] and dsn.password == env["POSTGRES_PASSWORD"]
    assert dsn.path.lstrip("/") == env["POSTGRES_DB"]
    assert env["POSTGRES_DB"] in " ".join(SERVICES["postgres"]["healthcheck"]["test"])
    assert mounts("seed")["dpproxy-data"] == str(args.dir)


def test_server_uses_what_the_seed_wrote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seed = parse(command("seed"))
    serve = parse(command("dpproxy"))
    assert serve.command == "serve" and serve.host == "0.0.0.0"
    config = SERVICES["dpproxy"]["environment"][CONFIG_ENV]
    assert config == f"{seed.dir}/{demo.CONFIG_FILE}"
    assert mounts("dpproxy")["dpproxy-data"] == str(seed.dir)
    published = [str(p).split(":") for p in SERVICES["dpproxy"]["ports"]]
    assert published == [["6432", str(serve.port)]]

    # The configuration `dpproxy demo --postgres` writes loads, and points at that server.
    loaded: list[tuple[str, str]] = []
    monkeypatch.setattr(
        demo, "load_postgres", lambda data, dsn, schema, progress: loaded.append((dsn, schema))
    )
    target = demo.PostgresTarget(seed.postgres, seed.schema)
    directory = tmp_path / "data"
    demo.prepare(directory, host="0.0.0.0", port=serve.port, patients=50, seed=1, postgres=target)
    settings = load_settings(directory / demo.CONFIG_FILE)
    assert loaded == [(seed.postgres, seed.schema)]
    assert settings.backend.engine == "postgres" and settings.backend.dsn == seed.postgres
    assert settings.backend.schema_or_default == seed.schema
    assert settings.state.path.parent == directory.resolve()
    assert set(settings.analysts) == {"alice", "bob"}
    assert not (directory / demo.DATABASE_FILE).exists()


def test_dockerfile() -> None:
    assert re.search(r"^USER (?!root)\w+", DOCKERFILE, re.M), "the image must not run as root"
    exposed = re.findall(r"^EXPOSE (\d+)", DOCKERFILE, re.M)
    cmd = json.loads(re.findall(r"^CMD (\[.*\])", DOCKERFILE, re.M)[-1])
    args = parse(cmd)
    assert exposed == [str(args.port)] and args.host == "0.0.0.0"
    assert f"'127.0.0.1', {args.port}" in DOCKERFILE  # the healthcheck's port
    assert "HEALTHCHECK" in DOCKERFILE and "/data" in DOCKERFILE
    assert SERVICES["dpproxy"]["ports"][0].split(":")[1] in exposed
