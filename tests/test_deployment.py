"""The deployment files, checked without a Docker engine.

``docker-compose.yml`` is parsed with PyYAML and held to what the operator relies on (health checks
everywhere, the two Redis roles, one beat, both queues, required secrets, no machine paths);
``ops/Dockerfile`` must install every package ``pyproject.toml`` declares; ``ops/runbook.md`` must
cover the operations the deployment issue names and every metric the reader exports. When a
``docker compose`` or ``docker-compose`` binary exists, ``config -q`` validates the file as well.
"""

from __future__ import annotations

import gc
import json
import re
import textwrap
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fakeredis
import pytest
import redis
import yaml
from celery import _state as celery_state
from prometheus_client import CollectorRegistry
from redbeat.schedulers import RedBeatConfig

from service.metrics import ReaderMetrics
from worker import celery_app
from worker.settings import Settings, load_settings

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "ops" / "Dockerfile"
RUNBOOK = ROOT / "ops" / "runbook.md"
DOCKERIGNORE = ROOT / ".dockerignore"

PROJECT_SERVICES = ("http", "worker", "beat")
ALL_SERVICES = ("mysql", "redis-broker", "redis-cache", *PROJECT_SERVICES, "flower")
SECRETS = ("GRAPHRAG_READER_TOKEN", "GRAPHRAG_WEBHOOK_SECRET")
# Keys of the Compose specification's service object that this file may use; a typo fails.
SERVICE_KEYS = {
    "build", "command", "container_name", "depends_on", "deploy", "entrypoint", "env_file",
    "environment", "expose", "extends", "healthcheck", "hostname", "image", "init", "labels",
    "logging", "networks", "platform", "ports", "profiles", "pull_policy", "read_only", "restart",
    "scale", "secrets", "security_opt", "shm_size", "stop_grace_period", "stop_signal", "tmpfs",
    "ulimits", "user", "volumes", "working_dir",
}
TOP_LEVEL_KEYS = {"name", "services", "volumes", "networks", "configs", "secrets"}
HEALTHCHECK_KEYS = {"test", "interval", "timeout", "retries", "start_period", "start_interval",
                    "disable"}
# ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?message}, ${VAR?message}, ${VAR:+alt}, ${VAR+alt}
INTERPOLATION = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?P<op>:?[-?+])?(?P<arg>[^}]*)\}")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = compose["services"]
    return found


def strings(node: Any) -> Iterator[str]:
    """Every string in a parsed YAML tree, keys included."""
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from strings(key)
            yield from strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from strings(item)


def argv(value: str | list[str]) -> list[str]:
    return value.split() if isinstance(value, str) else [str(part) for part in value]


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment", {})
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {str(k): str(v) for k, v in env.items()}


def option(args: list[str], *names: str) -> str | None:
    """The value of ``--name VALUE`` / ``--name=VALUE`` in ``args``."""
    for i, arg in enumerate(args):
        for name in names:
            if arg == name and i + 1 < len(args):
                return args[i + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


def interpolations(text: str) -> tuple[list[re.Match[str]], str]:
    """The ``${...}`` expressions of ``text`` and what is left once they and ``$$`` are removed."""
    unescaped = text.replace("$$", "")
    return list(INTERPOLATION.finditer(unescaped)), INTERPOLATION.sub("", unescaped)


# --- docker-compose.yml ---------------------------------------------------------------------------


def test_compose_has_every_service_and_only_known_keys(compose: dict[str, Any]) -> None:
    unknown_top = {k for k in compose if not k.startswith("x-")} - TOP_LEVEL_KEYS
    assert not unknown_top, f"unknown top-level keys {unknown_top}"
    assert set(ALL_SERVICES) <= set(compose["services"]), "a service is missing"
    for name, service in compose["services"].items():
        unknown = set(service) - SERVICE_KEYS
        assert not unknown, f"{name}: unknown keys {unknown}"
        assert "image" in service or "build" in service, f"{name}: neither image nor build"
        assert service.get("restart") in {"always", "unless-stopped", "on-failure"}, (
            f"{name}: needs a restart policy"
        )


def test_every_service_has_a_healthcheck(services: dict[str, dict[str, Any]]) -> None:
    for name, service in services.items():
        check = service.get("healthcheck")
        assert isinstance(check, dict), f"{name}: no healthcheck"
        assert set(check) <= HEALTHCHECK_KEYS, f"{name}: unknown healthcheck keys"
        assert not check.get("disable"), f"{name}: healthcheck disabled"
        test = check["test"]
        assert isinstance(test, list) and test[0] in {"CMD", "CMD-SHELL"} and len(test) > 1, name
        assert "curl" not in " ".join(test), f"{name}: curl is not in the images"


def test_dependencies_wait_until_healthy(services: dict[str, dict[str, Any]]) -> None:
    for name, service in services.items():
        depends = service.get("depends_on", {})
        assert isinstance(depends, dict), f"{name}: depends_on needs the long form with a condition"
        for target, spec in depends.items():
            assert target in services, f"{name} depends on unknown service {target}"
            assert spec.get("condition") == "service_healthy", f"{name} -> {target}"
            assert "healthcheck" in services[target]
    for name in PROJECT_SERVICES:
        assert {"redis-cache", "redis-broker"} <= set(services[name]["depends_on"]), name
    assert "redis-broker" in services["flower"]["depends_on"]


def redis_args(service: dict[str, Any]) -> list[str]:
    args = argv(service["command"])
    assert args[0] == "redis-server"
    return args


def test_broker_redis_never_evicts_and_persists(services: dict[str, dict[str, Any]]) -> None:
    args = redis_args(services["redis-broker"])
    assert option(args, "--maxmemory-policy") == "noeviction"
    assert option(args, "--appendonly") == "yes"
    assert any(v.endswith(":/data") for v in services["redis-broker"].get("volumes", []))


def test_cache_redis_evicts_volatile_keys_within_a_bound(services: dict[str, dict[str, Any]]) -> None:
    args = redis_args(services["redis-cache"])
    assert option(args, "--maxmemory-policy") == "volatile-lru"
    maxmemory = option(args, "--maxmemory")
    assert maxmemory and re.fullmatch(r"\d+(b|kb|mb|gb|k|m|g)?", maxmemory.lower())
    assert option(args, "--appendonly") in {None, "no"}  # a restart is a clean flush


def test_the_two_redis_roles_are_wired_to_the_right_instance(
    services: dict[str, dict[str, Any]],
) -> None:
    for name in PROJECT_SERVICES:
        env = environment(services[name])
        assert env["GRAPHRAG_REDIS_URL"].startswith("redis://redis-cache:"), name
        assert env["CELERY_BROKER_URL"].split(":-", 1)[-1].startswith("redis://redis-broker:"), name
        assert env["GRAPHRAG_DATABASE_URL"].split(":-", 1)[-1].startswith("mysql+pymysql://"), name
    flower_env = environment(services["flower"])
    assert flower_env["CELERY_BROKER_URL"] == environment(services["worker"])["CELERY_BROKER_URL"]


def test_rabbitmq_is_an_opt_in_profile_with_a_durable_volume(
    services: dict[str, dict[str, Any]],
) -> None:
    rabbit = services["rabbitmq"]
    assert rabbit["profiles"] == ["rabbitmq"] and rabbit["hostname"] == "rabbitmq"
    assert "rabbitmq-data:/var/lib/rabbitmq" in rabbit["volumes"]
    assert "rabbitmq-diagnostics" in rabbit["healthcheck"]["test"]
    assert all(str(port).startswith("127.0.0.1:") for port in rabbit.get("ports", []))
    assert all("profiles" not in services[name] for name in PROJECT_SERVICES)


def test_http_serves_on_all_interfaces(services: dict[str, dict[str, Any]]) -> None:
    http = services["http"]
    args = argv(http["command"])
    assert args[:2] == ["graphrag", "serve"]
    assert option(args, "--host") == "0.0.0.0"
    port = option(args, "--port") or "8000"
    assert any(str(p).endswith(f":{port}") for p in http["ports"])
    check = " ".join(http["healthcheck"]["test"])
    assert f"127.0.0.1:{port}/healthz" in check and "urllib" in check


def test_worker_consumes_both_queues(services: dict[str, dict[str, Any]]) -> None:
    worker = services["worker"]
    args = argv(worker["command"])
    if args[:2] == ["graphrag", "worker"]:
        queues = option(args, "--queues") or "realtime,bulk"  # the CLI's default
    else:
        assert args[:4] == ["celery", "-A", "worker.app", "worker"]
        queues = option(args, "-Q", "--queues") or ""
    assert set(queues.split(",")) == {"realtime", "bulk"}
    check = " ".join(worker["healthcheck"]["test"])
    assert "inspect ping" in check and "$$HOSTNAME" in check


def test_beat_runs_once(services: dict[str, dict[str, Any]]) -> None:
    beat = services["beat"]
    args = argv(beat["command"])
    assert args[:2] == ["graphrag", "beat"] or args[:4] == ["celery", "-A", "worker.app", "beat"]
    assert int(beat.get("deploy", {}).get("replicas", 1)) <= 1
    assert int(beat.get("scale", 1)) <= 1
    assert "worker" not in " ".join(args)  # no embedded beat (-B) in a worker either
    for name, service in services.items():
        if name != "beat":
            assert "-B" not in argv(service.get("command", [])), name
            assert "--beat" not in argv(service.get("command", [])), name


@pytest.mark.filterwarnings("ignore:RedBeat will stop falling back:DeprecationWarning")
def test_beat_healthcheck_reads_the_redbeat_lock(
    services: dict[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The check's key is RedBeat's real lock key; it passes while the lock exists, fails without."""
    monkeypatch.setattr(celery_app, "configure", lambda factory: None)  # keep the task runtime alone
    previous = celery_state.get_current_app()
    try:
        lock_key = RedBeatConfig(celery_app.create_celery(load_settings())).lock_key
    finally:
        previous.set_current()  # leave the global current app as other tests expect it
    test = services["beat"]["healthcheck"]["test"]
    assert test[:3] == ["CMD", "python", "-c"]
    env = environment(services["beat"])
    fake = fakeredis.FakeRedis()
    monkeypatch.setattr(redis.Redis, "from_url", classmethod(lambda cls, url, **kw: fake))
    monkeypatch.setenv("GRAPHRAG_REDIS_URL", env["GRAPHRAG_REDIS_URL"])
    monkeypatch.delenv("GRAPHRAG_REDIS_PREFIX", raising=False)

    def run_check() -> int:
        try:
            exec(test[3], {})
        except SystemExit as exit_:
            return int(exit_.code or 0)
        return 0

    assert run_check() == 1
    fake.set(lock_key, "token", px=90_000)
    assert run_check() == 0


def test_project_services_share_one_configuration(services: dict[str, dict[str, Any]]) -> None:
    """Snapshots carry a hash of the settings: http, worker and beat must agree on all of them."""
    envs = {name: environment(services[name]) for name in PROJECT_SERVICES}
    shared = {k: v for k, v in envs["http"].items() if k not in SECRETS}
    assert envs["worker"] == shared
    assert envs["beat"] == shared


def test_environment_names_are_settings_the_service_reads(
    services: dict[str, dict[str, Any]],
) -> None:
    known = {f"GRAPHRAG_{name.upper()}" for name in Settings.model_fields} | {"CELERY_BROKER_URL"}
    for name in PROJECT_SERVICES:
        unknown = set(environment(services[name])) - known
        assert not unknown, f"{name}: {unknown} are not settings (typo?)"


def test_secrets_are_required_from_the_environment(services: dict[str, dict[str, Any]]) -> None:
    env = environment(services["http"])
    for secret in SECRETS:
        assert re.fullmatch(rf"\$\{{{secret}:\?[^}}]+\}}", env[secret]), secret
    for name in ("worker", "beat"):  # they need neither: no reason to hand them over
        assert not set(SECRETS) & set(environment(services[name])), name


def test_every_variable_has_a_default_or_is_required(compose: dict[str, Any]) -> None:
    for text in strings(compose):
        found, rest = interpolations(text)
        assert "$" not in rest, f"unbraced or malformed interpolation in {text!r} (write $$ for $)"
        for match in found:
            op = match["op"] or ""
            assert op in {":-", "-", ":?", "?"}, f"${{{match['name']}}} has neither default nor :?"
            if "?" in op:
                assert match["arg"].strip(), f"{match['name']}: give :? a message"


def test_interpolation_parser_sees_what_compose_sees() -> None:
    found, rest = interpolations("a ${X:-1} b ${Y:?set Y (why)} c $$HOSTNAME d")
    assert [(m["name"], m["op"]) for m in found] == [("X", ":-"), ("Y", ":?")]
    assert "$" not in rest
    assert "$" in interpolations("$PLAIN")[1]
    assert "$" in interpolations("${UNCLOSED")[1]


def test_project_image_is_built_from_ops_dockerfile(services: dict[str, dict[str, Any]]) -> None:
    for name in PROJECT_SERVICES:
        build = services[name]["build"]
        context = (COMPOSE_FILE.parent / build["context"]).resolve()
        assert context == ROOT, name
        assert (context / build["dockerfile"]).resolve() == DOCKERFILE, name
    assert DOCKERFILE.is_file()
    assert "build" not in services["flower"], "Flower runs its official image"


def test_no_absolute_host_paths(compose: dict[str, Any]) -> None:
    declared = set(compose.get("volumes") or {})
    for name, service in compose["services"].items():
        for volume in service.get("volumes", []):
            source = volume.get("source", "") if isinstance(volume, dict) else volume.split(":")[0]
            assert source in declared, f"{name}: {volume!r} is not a named volume"
        build = service.get("build", {})
        context = build.get("context", ".") if isinstance(build, dict) else build
        assert not Path(context).is_absolute() and not context.startswith("~"), name
        for env_file in argv(service.get("env_file", [])):
            assert not Path(env_file).is_absolute(), name
    machine = re.compile(r"(^|[\s:=\"'])(/home/|/Users/|/work/|/root/|/tmp/|~/|[A-Za-z]:\\)")
    for text in strings(compose):
        assert not machine.search(text), f"machine path in {text!r}"


# --- ops/Dockerfile -------------------------------------------------------------------------------


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined, comments dropped."""
    lines = [ln for ln in DOCKERFILE.read_text(encoding="utf-8").splitlines()
             if not ln.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    result = []
    for line in joined.splitlines():
        if line.strip():
            keyword, _, rest = line.strip().partition(" ")
            result.append((keyword.upper(), rest.strip()))
    return result


def test_dockerfile_builds_a_non_root_python_311_image() -> None:
    steps = instructions()
    assert steps[0] == ("FROM", "python:3.11-slim")
    users = [args for kw, args in steps if kw == "USER"]
    assert users and users[-1].split(":")[0] not in {"root", "0"}
    assert any(kw == "RUN" and re.search(r"pip install (--\S+ )*\.(\s|$)", args) for kw, args in steps)
    assert ("EXPOSE", "8000") in steps
    cmd = [args for kw, args in steps if kw == "CMD"]
    assert json.loads(cmd[-1])[:4] == ["graphrag", "serve", "--host", "0.0.0.0"]
    assert not any(kw == "ENTRYPOINT" for kw, _ in steps), "compose commands start with graphrag/celery"


def test_dockerfile_copies_everything_pip_install_needs() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    packages = {p.split(".")[0] for p in project["tool"]["setuptools"]["packages"]}
    needed = [*sorted(packages), "pyproject.toml", project["project"]["readme"]]
    copied = {Path(part).name for kw, args in instructions() if kw == "COPY"
              for part in args.split()[:-1] if not part.startswith("--")}
    ignored = {ln.strip().strip("/") for ln in DOCKERIGNORE.read_text(encoding="utf-8").splitlines()
               if ln.strip() and not ln.startswith("#")}
    for item in needed:
        assert item in copied, f"ops/Dockerfile does not copy {item}"
        assert item not in ignored, f".dockerignore excludes {item}"
        assert (ROOT / item).exists(), item
    assert {".venv", ".git", "tests"} <= ignored


# --- ops/runbook.md -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def runbook() -> str:
    return RUNBOOK.read_text(encoding="utf-8")


@pytest.mark.parametrize("phrase", [
    "## Deploy", "docker compose up", "graphrag rebuild --all --queue", "graphrag rebuild --status",
    "## Scale workers", "--scale worker=", "--concurrency", "realtime", "bulk",
    "## Rotate the webhook secret", "GRAPHRAG_WEBHOOK_SECRET", "webhook-signature",
    "## Rotate the reader token", "GRAPHRAG_READER_TOKEN",
    "## Read metrics", "/metrics",
    "## Recover from a Redis flush", "redis-cache", "redis-broker", "RedBeat",
    "GRANT SELECT ON doughnut.note TO 'graphrag'@'%'",
    "graphrag audit --sample 500", "README.md",
])
def test_runbook_covers_the_operations(runbook: str, phrase: str) -> None:
    assert phrase in runbook


def runbook_yaml(marker: str) -> str:
    """The one YAML block of the runbook that contains ``marker``."""
    blocks = re.findall(r"```yaml\n(.*?)```", RUNBOOK.read_text(encoding="utf-8"), re.S)
    found = [b for b in blocks if marker in b]
    assert len(found) == 1, f"expected one YAML block with {marker!r} in the runbook"
    return textwrap.dedent(found[0])


def runbook_override_text() -> str:
    """The override file the runbook offers for splitting realtime and bulk workers."""
    return runbook_yaml("worker-bulk:")


def test_runbook_worker_host_file_runs_the_compose_worker_on_a_cluster(
        compose: dict[str, Any]) -> None:
    host = yaml.safe_load(runbook_yaml("docker-compose.worker.yml"))["services"]["worker"]
    worker = compose["services"]["worker"]
    assert host["command"] == worker["command"] and host["image"] == worker["image"]
    assert host["healthcheck"]["test"] == worker["healthcheck"]["test"]
    assert set(environment(worker)) < set(environment(host))
    assert environment(host)["GRAPHRAG_REDIS_CLUSTER"] == "true"


def test_runbook_queue_split_keeps_both_queues_and_the_configuration(compose: dict[str, Any]) -> None:
    override = yaml.safe_load(runbook_override_text())["services"]
    queues = set()
    for name in ("worker", "worker-bulk"):
        queues |= set((option(argv(override[name]["command"]), "--queues") or "").split(","))
    assert queues == {"realtime", "bulk"}
    bulk = override["worker-bulk"]
    assert environment(bulk) == environment(compose["services"]["worker"])
    assert bulk["build"] == compose["services"]["worker"]["build"]
    assert bulk["image"] == compose["services"]["worker"]["image"]
    assert bulk["healthcheck"]["test"] == compose["services"]["worker"]["healthcheck"]["test"]
    assert all(spec["condition"] == "service_healthy" for spec in bulk["depends_on"].values())


def test_runbook_names_every_exported_metric(runbook: str) -> None:
    registry = CollectorRegistry()
    ReaderMetrics.create(registry)
    names = set()
    for family in registry.collect():
        names.add(f"{family.name}_total" if family.type == "counter" else family.name)
    assert len(names) >= 10
    missing = sorted(n for n in names if f"`{n}" not in runbook)
    assert not missing, f"ops/runbook.md does not explain {missing}"


def test_runbook_commands_exist_in_the_cli(runbook: str) -> None:
    from click.testing import CliRunner

    from worker.cli import main

    for command in sorted(set(re.findall(r"graphrag ([a-z]+)", runbook))):
        result = CliRunner().invoke(main, [command, "--help"])
        assert result.exit_code == 0, f"`graphrag {command}` is not a command"
    for flag in ("--queue", "--status", "--all"):
        assert flag in CliRunner().invoke(main, ["rebuild", "--help"]).output
    assert "--sample" in CliRunner().invoke(main, ["audit", "--help"]).output


def test_a_worker_process_freezes_what_it_built_before_its_first_task(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The runtime is built first, then frozen: the collector's full passes skip it for good."""
    frozen_while_building: list[int] = []
    building = lambda: frozen_while_building.append(gc.get_freeze_count())  # noqa: E731
    monkeypatch.setattr(celery_app, "current", building)
    gc.unfreeze()
    try:
        celery_app._warm_up()
        assert frozen_while_building == [0] and gc.get_freeze_count() > 10_000
    finally:
        gc.unfreeze()
