"""``docker-compose.yml``, checked without a Docker engine.

The file is parsed with PyYAML and held to what the operator relies on: health checks everywhere,
the two Redis roles, one beat, both queues, required secrets, no machine paths. Its environment
names only settings the service reads, and http, worker and beat share one configuration.
Prometheus scrapes each process on the port it serves, and the monitoring's files are mounted
read-only from ops/.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fakeredis
import pytest
import redis
import yaml
from celery import _state as celery_state
from redbeat.schedulers import RedBeatConfig

from tests.deployment_support import COMPOSE_FILE, DOCKERFILE, ROOT, argv, environment, option
from tests.ops.monitoring import PROMETHEUS_CONFIG
from worker import celery_app
from worker.settings import Settings, load_settings

PROJECT_SERVICES = ("http", "worker", "beat")
ALL_SERVICES = ("mysql", "redis-broker", "redis-cache", *PROJECT_SERVICES, "flower", "prometheus",
                "grafana")
SECRETS = ("GRAPHRAG_READER_TOKEN",)
#: the HTTP process's own, and optional: a webhook sender's secret (GRAPHRAG_CHANGE_SOURCE=webhook)
OPTIONAL_SECRETS = ("GRAPHRAG_WEBHOOK_SECRET",)
# Keys of the Compose specification's service object that this file may use; a typo fails.
SERVICE_KEYS = {
    "build", "command", "configs", "container_name", "depends_on", "deploy", "entrypoint", "env_file",
    "environment", "expose", "extends", "healthcheck", "hostname", "image", "init", "labels",
    "logging", "mem_limit", "networks", "platform", "ports", "profiles", "pull_policy", "read_only",
    "restart",
    "scale", "secrets", "security_opt", "shm_size", "stop_grace_period", "stop_signal", "tmpfs",
    "ulimits", "user", "volumes", "working_dir",
}
TOP_LEVEL_KEYS = {"name", "services", "volumes", "networks", "configs", "secrets"}
HEALTHCHECK_KEYS = {"test", "interval", "timeout", "retries", "start_period", "start_interval",
                    "disable"}
# ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?message}, ${VAR?message}, ${VAR:+alt}, ${VAR+alt}
INTERPOLATION = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?P<op>:?[-?+])?(?P<arg>[^}]*)\}")


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
    maxmemory = option(args, "--maxmemory") or ""
    found, _ = interpolations(maxmemory)  # a variable with a default, which is what applies
    value = found[0]["arg"] if found else maxmemory
    assert value and re.fullmatch(r"\d+(b|kb|mb|gb|k|m|g)?", value.lower()), maxmemory
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
        assert args[:4] == ["celery", "-A", "worker.celery.app", "worker"]
        queues = option(args, "-Q", "--queues") or ""
    assert set(queues.split(",")) == {"realtime", "bulk"}
    check = " ".join(worker["healthcheck"]["test"])
    assert "inspect ping" in check and "$$HOSTNAME" in check


def test_beat_runs_once(services: dict[str, dict[str, Any]]) -> None:
    beat = services["beat"]
    args = argv(beat["command"])
    assert args[:2] == ["graphrag", "beat"] or args[:4] == ["celery", "-A", "worker.celery.app", "beat"]
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
    shared = {k: v for k, v in envs["http"].items() if k not in SECRETS + OPTIONAL_SECRETS}
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
    for secret in OPTIONAL_SECRETS:
        assert env[secret] == f"${{{secret}:-}}", secret
    for name in ("worker", "beat"):  # they need none: no reason to hand them over
        assert not set(SECRETS + OPTIONAL_SECRETS) & set(environment(services[name])), name


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


# --- monitoring: prometheus and grafana -----------------------------------------------------------


def test_prometheus_scrapes_each_process_on_the_port_it_serves(
    services: dict[str, dict[str, Any]],
) -> None:
    served = {
        "http": option(argv(services["http"]["command"]), "--port"),
        "worker": environment(services["worker"])["GRAPHRAG_WORKER_METRICS_PORT"],
        "cdc": option(argv(services["cdc"]["command"]), "--metrics-port"),
    }
    config = yaml.safe_load(PROMETHEUS_CONFIG.read_text(encoding="utf-8"))
    found = {}
    for job in config["scrape_configs"]:
        (discovery,) = job["dns_sd_configs"]
        (name,) = discovery["names"]
        found[name] = str(discovery["port"])
    assert found == served


def test_monitoring_files_are_mounted_read_only_from_ops(compose: dict[str, Any]) -> None:
    configs = compose["configs"]
    for name, spec in configs.items():
        path = (COMPOSE_FILE.parent / spec["file"]).resolve()
        assert path.is_file() and path.is_relative_to(ROOT / "ops"), name
    rules = {m["source"]: m["target"] for m in compose["services"]["prometheus"]["configs"]}
    config = yaml.safe_load(PROMETHEUS_CONFIG.read_text(encoding="utf-8"))
    assert config["rule_files"] == [rules["prometheus-rules"]]
    assert (COMPOSE_FILE.parent / configs["prometheus-config"]["file"]).resolve() == PROMETHEUS_CONFIG
    for name in ("prometheus", "grafana"):
        assert all(str(p).startswith("127.0.0.1:") for p in compose["services"][name]["ports"]), name
    grafana = compose["services"]["grafana"]
    assert grafana["depends_on"] == {"prometheus": {"condition": "service_healthy"}}
    assert environment(grafana)["GF_AUTH_ANONYMOUS_ORG_ROLE"] == "Viewer"
