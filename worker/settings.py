"""Settings, read once from the environment at the composition root and passed down.

Every variable is ``GRAPHRAG_<NAME>``; a bad or missing value fails at start-up with a
:class:`~graphrag.errors.ConfigurationError` naming the variable.
"""

from __future__ import annotations

import base64
import binascii
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from graphrag.errors import ConfigurationError
from graphrag.params import STRATEGIES

__all__ = ["DEFAULT_DATABASE_URL", "Settings", "load_settings"]

DEFAULT_DATABASE_URL = "sqlite:///graphrag.db"


class Settings(BaseSettings):
    """The service's configuration (environment variables ``GRAPHRAG_*``)."""

    model_config = SettingsConfigDict(env_prefix="GRAPHRAG_", frozen=True, extra="ignore")

    database_url: str = DEFAULT_DATABASE_URL
    strategy: Literal["wavefront", "layered", "relationship-bfs"] = "wavefront"
    token_counter: Literal["tiktoken", "chars", "one-per-note"] = "tiktoken"
    tiktoken_file: Path | None = None
    max_token_limit: int = Field(default=5000, ge=1, le=1_000_000)
    seeds: Annotated[tuple[int, ...], NoDecode] = (0,)
    in_chunk: int = Field(default=100, ge=1, le=1000)
    # Snapshots in Redis
    redis_url: str = "redis://127.0.0.1:6379/0"
    redis_prefix: str = Field(default="graphrag:v1", min_length=1)
    redis_timeout_ms: int = Field(default=500, ge=10, le=60_000)
    strategies: Annotated[tuple[str, ...], NoDecode] = ("wavefront",)
    layered_limits: Annotated[tuple[int, ...], NoDecode] = (2500, 5000)
    soft_ttl_s: int = Field(default=86_400, ge=1)
    hard_ttl_s: int = Field(default=7 * 86_400, ge=1)
    lock_ttl_ms: int = Field(default=10_000, ge=100)
    lock_wait_ms: int = Field(default=3_000, ge=0)
    # HTTP
    reader_token: SecretStr | None = None
    webhook_secret: SecretStr | None = None
    webhook_max_events: int = Field(default=1000, ge=1, le=100_000)
    # Celery
    broker_url: str = Field(
        default="redis://127.0.0.1:6379/1",
        validation_alias=AliasChoices("CELERY_BROKER_URL", "GRAPHRAG_BROKER_URL", "broker_url"),
    )
    debounce_ms: int = Field(default=50, ge=0, le=60_000)
    nightly_hour_utc: int = Field(default=3, ge=0, le=23)
    visibility_timeout_s: int = Field(default=900, ge=60)
    task_time_limit_s: int = Field(default=300, ge=10)
    max_bulk_backlog: int = Field(default=20, ge=1)
    rebuild_page: int = Field(default=500, ge=1, le=10_000)

    @field_validator("seeds", "layered_limits", "strategies", mode="before")
    @classmethod
    def _comma_separated(cls, value: object) -> object:
        if isinstance(value, str):
            parts = tuple(p.strip() for p in value.split(",") if p.strip())
            if not parts:
                raise ValueError("needs at least one value, e.g. 0 or 0,1,2")
            return parts
        return value

    @field_validator("webhook_secret")
    @classmethod
    def _standard_webhooks_secret(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None:
            return None
        text = value.get_secret_value()
        body = text.removeprefix("whsec_")
        try:
            key = base64.b64decode(body + "=" * (-len(body) % 4), validate=True)
        except (binascii.Error, ValueError):
            key = b""
        if not text.startswith("whsec_") or len(key) < 16:
            raise ValueError("must be 'whsec_' followed by base64 of at least 16 bytes")
        return value

    @field_validator("strategies")
    @classmethod
    def _known_strategies(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [s for s in value if s not in STRATEGIES]
        if unknown:
            raise ValueError(f"unknown strategy {unknown[0]!r}; choose from {', '.join(STRATEGIES)}")
        return value

    @model_validator(mode="after")
    def _ttls_in_order(self) -> Settings:
        if self.soft_ttl_s > self.hard_ttl_s:
            raise ValueError("GRAPHRAG_SOFT_TTL_S must not exceed GRAPHRAG_HARD_TTL_S")
        if self.task_time_limit_s + 60 >= self.visibility_timeout_s:
            raise ValueError("GRAPHRAG_TASK_TIME_LIMIT_S must stay well below "
                             "GRAPHRAG_VISIBILITY_TIMEOUT_S (a running task would be redelivered)")
        return self


def load_settings(**overrides: object) -> Settings:
    """Settings from the environment plus explicit overrides (CLI flags)."""
    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})  # type: ignore[arg-type]
    except ValidationError as err:
        first = err.errors()[0]
        if not first["loc"]:
            raise ConfigurationError(str(first["msg"]).removeprefix("Value error, ")) from err
        field = str(first["loc"][0])
        name = field if field.isupper() else f"GRAPHRAG_{field.upper()}"
        raise ConfigurationError(f"{name}: {first['msg']}") from err
    except ValueError as err:
        raise ConfigurationError(str(err)) from err
