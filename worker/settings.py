"""Settings, read once from the environment at the composition root and passed down.

Every variable is ``GRAPHRAG_<NAME>``; a bad or missing value fails at start-up with a
:class:`~graphrag.errors.ConfigurationError` naming the variable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from graphrag.errors import ConfigurationError

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

    @field_validator("seeds", mode="before")
    @classmethod
    def _comma_separated(cls, value: object) -> object:
        if isinstance(value, str):
            parts = [p.strip() for p in value.split(",") if p.strip()]
            if not parts:
                raise ValueError("needs at least one seed, e.g. 0 or 0,1,2")
            return tuple(int(p) for p in parts)
        return value


def load_settings(**overrides: object) -> Settings:
    """Settings from the environment plus explicit overrides (CLI flags)."""
    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})  # type: ignore[arg-type]
    except ValidationError as err:
        first = err.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else "settings"
        raise ConfigurationError(f"GRAPHRAG_{field.upper()}: {first['msg']}") from err
    except ValueError as err:
        raise ConfigurationError(str(err)) from err
