"""Settings, read once from the environment at the composition root and passed down.

Every variable is ``GRAPHRAG_<NAME>``; a bad or missing value fails at start-up with a
:class:`~graphrag.core.errors.ConfigurationError` naming the variable.
"""

from __future__ import annotations

import base64
import binascii
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from graphrag import default_strategy, strategy_names
from graphrag.core.errors import ConfigurationError

__all__ = ["DEFAULT_DATABASE_URL", "Settings", "load_settings"]

DEFAULT_DATABASE_URL = "sqlite:///graphrag.db"


#: Redis or RabbitMQ; ``memory`` for a demo or test in one process.
_BROKER_SCHEMES = ("redis", "rediss", "amqp", "amqps", "pyamqp", "memory")


class Settings(BaseSettings):
    """The service's configuration (environment variables ``GRAPHRAG_*``). A new field needs its
    meaning in :mod:`worker.settings_meanings`; README's table is generated from both (``make docs``)."""

    # populate_by_name: a field's own name sets it in code (load_settings' overrides), never an
    # unprefixed environment variable (a stray BROKER_URL or SCHEMA_NAME is not a setting)
    model_config = SettingsConfigDict(env_prefix="GRAPHRAG_", frozen=True, extra="ignore",
                                      populate_by_name=True)

    database_url: str = DEFAULT_DATABASE_URL
    #: connections each process keeps open to the database, and the bound of one statement
    #: (0: the server's own); a live compute sends a few statements (docs/capacity.md)
    database_pool_size: int = Field(default=5, ge=1, le=100)
    database_statement_timeout_ms: int = Field(default=30_000, ge=0, le=3_600_000)
    #: table layout of Doughnut's database: ``auto`` (detected) or a profile name
    schema_name: str = Field(default="auto", validation_alias=AliasChoices("GRAPHRAG_SCHEMA"))
    #: default strategy; None: the first registered strategy of the database's graph model
    strategy: str | None = None
    token_counter: Literal["tiktoken", "chars", "one-per-note"] = "tiktoken"
    tiktoken_file: Path | None = None
    #: tiktoken counts remembered per exact note JSON, per worker process (0: none;
    #: graphrag.core.tokens).
    token_memo_entries: int = Field(default=100_000, ge=0, le=10_000_000)
    max_token_limit: int = Field(default=5000, ge=1, le=1_000_000)
    seeds: Annotated[tuple[int, ...], NoDecode] = (0,)
    in_chunk: int = Field(default=100, ge=1, le=1000)
    #: focus-context: ``doughnut`` keeps Doughnut's cross-depth duplicates, ``across-depths`` drops them
    focus_context_dedupe: Literal["doughnut", "across-depths"] = "doughnut"
    # Snapshots in Redis
    redis_url: str = "redis://127.0.0.1:6379/0"
    redis_prefix: str = Field(default="graphrag:v1", min_length=1)
    redis_timeout_ms: int = Field(default=500, ge=10, le=60_000)
    #: The snapshot cache is a Redis Cluster; ``GRAPHRAG_REDIS_URL`` names any of its nodes.
    redis_cluster: bool = False
    #: strategies kept as snapshots; None: the default strategy only
    strategies: Annotated[tuple[str, ...] | None, NoDecode] = None
    layered_limits: Annotated[tuple[int, ...], NoDecode] = (2500, 5000)
    soft_ttl_s: int = Field(default=86_400, ge=1)
    hard_ttl_s: int = Field(default=7 * 86_400, ge=1)
    lock_ttl_ms: int = Field(default=10_000, ge=100)
    lock_wait_ms: int = Field(default=3_000, ge=0)
    #: parsed traces a reader process keeps (about 80 KB each), so a replay of a snapshot read
    #: again skips inflating and parsing it (service.reader.traces); 0 keeps none
    parsed_traces: int = Field(default=512, ge=0, le=100_000)
    #: MiB of answers replayed from traces a reader process keeps, so the same read again (note,
    #: tokenLimit, format) is a hit (service.reader.traces); 0 keeps none
    kept_answers_mb: int = Field(default=32, ge=0, le=65_536)
    #: MiB of stored values a reader process keeps decoded, so a hit read again is not decoded
    #: again (service.reader.decoded); 0 keeps none
    decoded_values_mb: int = Field(default=32, ge=0, le=65_536)
    # HTTP
    reader_token: SecretStr | None = None
    #: who Doughnut's own paths read as: the shared token's owner view, Doughnut's users, or both
    reader_auth: Literal["shared", "doughnut", "both"] = "shared"
    #: without change capture, seconds an access answer is remembered (service.access)
    token_cache_s: int = Field(default=5, ge=0, le=3_600)
    #: Doughnut's backend (e.g. http://doughnut:8081), asked whose web session a request's cookie
    #: carries (service.sessions); None: a cookie without a known token is handed to Doughnut (503)
    doughnut_url: str | None = None
    #: seconds a session's user is remembered (the delay before a signed-out session stops reading)
    session_cache_s: int = Field(default=30, ge=0, le=3_600)
    #: how long asking Doughnut whose session it is may take before the request is handed to it
    doughnut_timeout_ms: int = Field(default=2_000, ge=50, le=60_000)
    #: ``graphrag serve``'s public listener (Doughnut's two paths with Doughnut's credentials only;
    #: what the proxy points at); None: one listener serves everything (docs: "Listeners")
    public_port: int | None = Field(default=None, ge=1, le=65_535)
    #: seconds a client may take to send a request's head before its connection is closed
    header_timeout_s: float = Field(default=10.0, gt=0, le=600)
    #: ``graphrag serve`` logs a line per request (off: the shipped proxy logs every request, and
    #: the line costs a tenth of a hit's time in the server)
    access_log: bool = False
    # MCP (worker.mcp): what one client may hold
    mcp_max_subscriptions: int = Field(default=100, ge=1, le=100_000)
    mcp_max_listen_uris: int = Field(default=100, ge=1, le=100_000)
    mcp_max_listens: int = Field(default=1_000, ge=1, le=100_000)
    mcp_max_sessions: int = Field(default=1_000, ge=1, le=100_000)
    mcp_session_idle_s: float = Field(default=1_800.0, gt=0, le=86_400)
    webhook_secret: SecretStr | None = None
    webhook_max_events: int = Field(default=1000, ge=1, le=100_000)
    # Celery
    broker_url: str = Field(
        default="redis://127.0.0.1:6379/1",
        validation_alias=AliasChoices("CELERY_BROKER_URL", "GRAPHRAG_BROKER_URL"),
    )
    #: Change capture: the replication client's server id (unique among the database's replicas)
    #: and the TTL of the lease that keeps it to one instance.
    cdc_server_id: int = Field(default=4_242_001, ge=1, le=2**32 - 1)
    #: change capture's database URL (a user with REPLICATION SLAVE, REPLICATION CLIENT); unset
    #: or empty: GRAPHRAG_DATABASE_URL
    cdc_database_url: str | None = None
    #: what keeps snapshots current: ``cdc`` (change capture; a reader computes live until its
    #: heartbeat appears), ``webhook`` (a signed sender; needs GRAPHRAG_WEBHOOK_SECRET), ``none``
    #: (only the nightly rebuild and the soft TTL), ``auto`` (whichever is found)
    change_source: Literal["auto", "cdc", "webhook", "none"] = "auto"
    cdc_lease_ms: int = Field(default=6_000, ge=1_000, le=600_000)
    #: RabbitMQ: deliveries of one message before it is parked in ``<queue>.parked``.
    delivery_limit: int = Field(default=5, ge=1, le=1000)
    debounce_ms: int = Field(default=50, ge=0, le=60_000)
    #: A drain rebuilds at most this many foci at once (an edit's nearest foci wait for about one
    #: such batch on a busy worker process) ...
    drain_batch: int = Field(default=100, ge=1, le=10_000)
    #: ... and its task keeps its process this long (then the batch it is in) before queueing its
    #: successor behind the events that arrived meanwhile (tasks.jobs); well below the task time
    #: limit.
    drain_budget_ms: int = Field(default=250, ge=1, le=10_000)
    #: with change capture: snapshots are trusted only while its heartbeat is younger than this and
    #: it trails the database by less (0: always trusted); service.feed
    max_feed_lag_s: int = Field(default=10, ge=0, le=86_400)
    #: Shards of the dirty set: how many workers can drain edits at once (docs/architecture.md).
    dirty_shards: int = Field(default=16, ge=1, le=256)
    nightly_hour_utc: int = Field(default=3, ge=0, le=23)
    #: ``graphrag worker``: serve Prometheus metrics on this port (None: none; worker.celery.metrics)
    worker_metrics_port: int | None = Field(default=None, ge=1, le=65535)
    visibility_timeout_s: int = Field(default=900, ge=60)
    task_time_limit_s: int = Field(default=300, ge=10)
    max_bulk_backlog: int = Field(default=20, ge=1)
    rebuild_page: int = Field(default=500, ge=1, le=10_000)
    #: A full rebuild's piece (notebooks in order, packed up to this many notes) is computed with
    #: one workspace: its notes bound the memory and the time of one task, which must end within
    #: GRAPHRAG_TASK_TIME_LIMIT_S (5,000 notes: about 30 s of today's Doughnut with one seed).
    rebuild_piece_notes: int = Field(default=5_000, ge=1, le=50_000)
    #: A worker process carries what one rebuild loaded into the next while no edit is recorded,
    #: for at most this many foci (0: never) and this long (service.carry).
    carry_foci: int = Field(default=5_000, ge=0, le=1_000_000)
    carry_age_ms: int = Field(default=30_000, ge=0, le=3_600_000)
    #: A full rebuild carries its workspace from piece to piece while no edit is recorded, for at
    #: most this many foci (0: a workspace per piece): the memory bound of a rebuilding process,
    #: about 9 KB per focus on the bench graphs (service.full_rebuild, docs/capacity.md).
    piece_carry_foci: int = Field(default=100_000, ge=0, le=10_000_000)
    #: A worker process lets that workspace go when no piece followed its last one for this long
    #: (the run is over: a bulk-only worker would hold it until the next night; worker.celery.idle).
    piece_carry_idle_s: float = Field(default=60.0, gt=0, le=86_400)

    @field_validator("seeds", "layered_limits", "strategies", mode="before")
    @classmethod
    def _comma_separated(cls, value: object) -> object:
        if isinstance(value, str):
            parts = tuple(p.strip() for p in value.split(",") if p.strip())
            if not parts:
                raise ValueError("needs at least one value, e.g. 0 or 0,1,2")
            return parts
        return value

    @field_validator("broker_url")
    @classmethod
    def _known_broker(cls, value: str) -> str:
        scheme = value.partition("://")[0]
        if scheme not in _BROKER_SCHEMES:
            raise ValueError(f"the broker must be Redis or RabbitMQ ({', '.join(_BROKER_SCHEMES)}"
                             f"://...), not {scheme or value!r}")
        parts = urlsplit(value)
        try:
            port_ok = parts.port != 0
        except ValueError:  # not a number
            port_ok = False
        if scheme != "memory" and not (parts.hostname and port_ok):
            raise ValueError(f"bad host or port {parts.netloc.rpartition('@')[2]!r}")  # no password
        return value

    @field_validator("webhook_secret", "cdc_database_url", "doughnut_url", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        """``VAR=`` (what compose passes for an unset optional variable) means unset."""
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("doughnut_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and urlsplit(value).scheme not in ("http", "https"):
            raise ValueError("must be Doughnut's backend address, http(s)://host[:port]")
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
    def _known_strategies(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        for name in value or ():
            _known(name)
        return value

    @field_validator("strategy")
    @classmethod
    def _known_strategy(cls, value: str | None) -> str | None:
        return None if value is None else _known(value)

    @field_validator("schema_name")
    @classmethod
    def _known_schema(cls, value: str) -> str:
        from storage.profiles import SCHEMAS  # a light module; the layer rule allows worker -> storage

        if value not in SCHEMAS:
            raise ValueError(f"unknown schema {value!r}; choose from {', '.join(SCHEMAS)}")
        return value

    def strategies_for(self, model: str) -> tuple[str, ...]:
        """The strategies kept as snapshots, for a database of graph ``model``."""
        return self.strategies or (self.default_strategy(model),)

    def default_strategy(self, model: str) -> str:
        """GRAPHRAG_STRATEGY, else the first strategy of ``model``, else the first kept one."""
        if self.strategy is not None:
            return self.strategy
        if self.strategies:
            return self.strategies[0]
        return default_strategy(model)

    @model_validator(mode="after")
    def _broker_not_on_the_cluster(self) -> Settings:
        same = self.broker_url.partition("://")[2].split("/")[0] == \
            self.redis_url.partition("://")[2].split("/")[0]
        if self.redis_cluster and self.broker_url.startswith(("redis:", "rediss:")) and same:
            raise ValueError("CELERY_BROKER_URL: the broker cannot be the Redis Cluster (Celery has no "
                             "cluster transport); use RabbitMQ or a separate Redis")
        return self

    @model_validator(mode="after")
    def _ttls_in_order(self) -> Settings:
        if self.soft_ttl_s > self.hard_ttl_s:
            raise ValueError("GRAPHRAG_SOFT_TTL_S must not exceed GRAPHRAG_HARD_TTL_S")
        if self.task_time_limit_s + 60 >= self.visibility_timeout_s:
            raise ValueError("GRAPHRAG_TASK_TIME_LIMIT_S must stay well below "
                             "GRAPHRAG_VISIBILITY_TIMEOUT_S (a running task would be redelivered)")
        if self.drain_budget_ms * 4 > self.task_time_limit_s * 1000:
            raise ValueError("GRAPHRAG_DRAIN_BUDGET_MS must stay well below GRAPHRAG_TASK_TIME_LIMIT_S "
                             "(at most a quarter of it: a drain would be stopped in mid-batch)")
        return self


def _known(name: str) -> str:
    if name not in strategy_names():
        raise ValueError(f"unknown strategy {name!r}; choose from {', '.join(strategy_names())}")
    return name


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
        raise ConfigurationError(f"{name}: {str(first['msg']).removeprefix('Value error, ')}") from err
    except ValueError as err:
        raise ConfigurationError(str(err)) from err
