"""What the deployment tests share: where the deployment files are, and how a service of
``docker-compose.yml`` (or of a Compose file the runbook offers) is read: its command line and its
environment, whichever of the Compose forms it is written in.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "ops" / "Dockerfile"


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
