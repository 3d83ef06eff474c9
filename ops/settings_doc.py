"""README's two configuration tables, generated (``make docs``; ops.docgen writes them).

* ``settings``: every field of :class:`worker.settings.Settings`, in the class's order: its
  environment variable (``GRAPHRAG_<NAME>``, or its aliases such as ``GRAPHRAG_SCHEMA`` and
  ``CELERY_BROKER_URL``), its default as an operator writes it (and docker-compose.yml's, where the
  file gives another: ``${VAR:-default}``, or ``required`` for ``${VAR:?message}``) and its meaning
  (:mod:`worker.settings_meanings`).
* ``compose-settings``: the variables only docker-compose.yml reads (:data:`COMPOSE_ONLY`), with the
  default the compose file gives each.

tests/test_settings_doc.py fails while README shows other tables, and while docker-compose.yml uses a
variable that neither table names.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import AliasChoices
from pydantic.fields import FieldInfo

from worker.settings import Settings
from worker.settings_meanings import DEFAULTS_SHOWN, MEANINGS

__all__ = ["COMPOSE_FILE", "COMPOSE_ONLY", "compose_defaults", "compose_table", "env_names",
           "interpolations", "missing_meanings", "settings_table"]

COMPOSE_FILE = Path(__file__).resolve().parents[1] / "docker-compose.yml"

#: Variables docker-compose.yml reads that the service does not: name, meaning.
COMPOSE_ONLY: tuple[tuple[str, str], ...] = (
    ("GRAPHRAG_IMAGE_TAG", "tag of the image the project's services run "
                           "(`doughnut-graphrag:<tag>`, built from `ops/Dockerfile`; one per release: "
                           "runbook, \"Upgrade and roll back\")"),
    ("GRAPHRAG_HTTP_BIND", "host address the internal listener (`http`'s 8000) and `mcp` are "
                           "published on; a private address for a main app on another host"),
    ("GRAPHRAG_HTTP_PORT", "host port of `http`'s internal listener (the shared token, `?viewer=`, "
                           "`/metrics`, `/healthz`, the webhook)"),
    ("GRAPHRAG_PUBLIC_HTTP_PORT", "host port of `http`'s public listener (Doughnut's two paths for "
                                  "Doughnut's users): what the proxy in front of Doughnut points at"),
    ("GRAPHRAG_MCP_PORT", "host port of `mcp` (streamable HTTP at `/mcp`, the reader token)"),
    ("GRAPHRAG_CACHE_MAXMEMORY", "`maxmemory` of the snapshot cache, `redis-cache` (about 30k notes of "
                                 "today's Doughnut per GB; `graphrag doctor` compares it with the "
                                 "site)"),
    ("GRAPHRAG_WORKER_MEMORY", "memory limit of a `worker` container (a full rebuild's process carries "
                               "up to about 1 GB)"),
    ("MYSQL_ROOT_PASSWORD", "root password of the bundled `mysql`, the local stand-in for Doughnut's "
                            "database"),
    ("RABBITMQ_PASSWORD", "password of RabbitMQ's `graphrag` user (`--profile rabbitmq`; put it in "
                          "`CELERY_BROKER_URL` too)"),
    ("RABBITMQ_UI_PORT", "RabbitMQ's management UI, on 127.0.0.1 only"),
    ("FLOWER_BASIC_AUTH", "`user:password` of Flower (it can shut workers down and revoke tasks)"),
    ("FLOWER_PORT", "Flower, on 127.0.0.1 only"),
    ("PROMETHEUS_PORT", "Prometheus's UI (its Alerts tab), on 127.0.0.1 only"),
    ("GRAFANA_ADMIN_PASSWORD", "Grafana's admin password (the dashboard itself needs no login)"),
    ("GRAFANA_PORT", "Grafana and its dashboard, on 127.0.0.1 only"),
)

_HEAD = ("| variable | default | meaning |", "|---|---|---|")
_COMPOSE_HEAD = ("| variable | default in docker-compose.yml | meaning |", "|---|---|---|")
_BODY = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(:?[-?+])?(.*)", re.DOTALL)


def env_names(name: str, field: FieldInfo) -> tuple[str, ...]:
    """The environment variables a field is read from: its upper-case aliases, else GRAPHRAG_<NAME>."""
    alias = field.validation_alias
    choices = alias.choices if isinstance(alias, AliasChoices) else [alias]
    named = tuple(c for c in choices if isinstance(c, str) and c.isupper())
    return named or (f"GRAPHRAG_{name.upper()}",)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return ",".join(_text(v) for v in value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _default(name: str, field: FieldInfo) -> str:
    if name in DEFAULTS_SHOWN:
        return DEFAULTS_SHOWN[name]
    return "(none)" if field.default is None else f"`{_text(field.default)}`"


def _with_compose(own: str, names: tuple[str, ...], compose: dict[str, list[str]]) -> str:
    """The service's default, and docker-compose.yml's where it gives another."""
    other = [d for n in names for d in compose.get(n, []) if d not in (own, "``", "(none)")]
    return own + "".join(f"; compose: {d}" for d in other)


def _row(names: tuple[str, ...], default: str, meaning: str) -> str:
    shown = f"`{names[0]}`" + "".join(f" (or `{n}`)" for n in names[1:])
    return f"| {shown} | {default} | {meaning.replace('|', chr(92) + '|')} |"


def missing_meanings() -> list[str]:
    """The fields of the settings class that worker/settings_meanings.py does not explain."""
    return [name for name in Settings.model_fields if name not in MEANINGS]


def settings_table() -> str:
    """The table of every setting the service reads (a field without a meaning says so)."""
    rows, compose = list(_HEAD), compose_defaults()
    for name, field in Settings.model_fields.items():
        names = env_names(name, field)
        meaning = MEANINGS.get(name, "**no meaning yet: add it to worker/settings_meanings.py**")
        rows.append(_row(names, _with_compose(_default(name, field), names, compose), meaning))
    return "\n".join(rows) + "\n"


def interpolations(text: str) -> Iterator[tuple[str, str, str]]:
    """(name, operator, argument) of every ``${...}`` in ``text``, nested ones too; ``$$`` escapes."""
    text, at = text.replace("$$", ""), 0
    while (start := text.find("${", at)) >= 0:
        end, depth = start + 2, 1
        while depth and end < len(text):
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            end += 1
        found = _BODY.fullmatch(text[start + 2:end - 1])
        if found:
            yield found[1], found[2] or "", found[3]
            yield from interpolations(found[3])
        at = end


def compose_defaults(path: Path = COMPOSE_FILE) -> dict[str, list[str]]:
    """Per variable of the compose file, the defaults it is given there, as the table shows them
    (comment lines are left out, as Compose leaves them)."""
    found: dict[str, list[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        for name, op, arg in [] if line.lstrip().startswith("#") else interpolations(line):
            shown = "required" if "?" in op else f"`{arg}`" if "-" in op else "(none)"
            if shown not in found.setdefault(name, []):
                found[name].append(shown)
    return found


def compose_table(path: Path = COMPOSE_FILE) -> str:
    """The table of the variables only the compose file reads."""
    defaults = compose_defaults(path)
    rows = list(_COMPOSE_HEAD)
    for name, meaning in COMPOSE_ONLY:
        rows.append(_row((name,), " or ".join(defaults.get(name, ["(unused)"])), meaning))
    return "\n".join(rows) + "\n"
