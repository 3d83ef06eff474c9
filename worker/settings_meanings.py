"""What each setting of :class:`worker.settings.Settings` means to an operator.

README.md's "Configuration" table is generated from the class (names, aliases, defaults) and from
this mapping (``make docs``, ops.settings_doc); tests/test_settings_doc.py fails when a field has no
meaning here, a meaning names no field, or README shows another table. Texts are markdown.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["DEFAULTS_SHOWN", "MEANINGS"]

#: A default the field's value does not say the way an operator needs it (the value is ``None``).
DEFAULTS_SHOWN: Mapping[str, str] = {
    "strategy": "the layout's first",
    "tiktoken_file": "installed file",
    "strategies": "the default strategy",
}

#: Per field, in the class's order: what it means.
MEANINGS: Mapping[str, str] = {
    "database_url": "SQLAlchemy URL of Doughnut's database (read-only use; its grants: \"Deploying "
                    "beside Doughnut\")",
    "database_pool_size": "connections each process keeps open to the database: budget (readers + "
                          "worker processes) × this against the server's `max_connections`",
    "database_statement_timeout_ms": "the bound of one statement (MariaDB's `max_statement_time`, "
                                     "MySQL's `max_execution_time`; `0`: the server's own); a live "
                                     "compute sends a few statements",
    "schema_name": "table layout of the database: `auto` (detected on first use), `doughnut-2025` or "
                   "`doughnut-2026`; set it explicitly for a reader that must start while the "
                   "database is down",
    "strategy": "default strategy: `focus-context` on today's Doughnut; `wavefront`, `layered` or "
                "`relationship-bfs` on the 2025 tree",
    "token_counter": "the tree strategies' counter: `tiktoken`, `chars` or `one-per-note` "
                     "(focus-context always uses Doughnut's estimate)",
    "tiktoken_file": "path of `cl100k_base.tiktoken`",
    "token_memo_entries": "tiktoken counts a worker process remembers per exact note JSON (a count "
                          "never goes stale; about 0.5 KB each; `0`: none)",
    "max_token_limit": "the largest tokenLimit snapshots answer (larger ones are computed live); "
                       "focus-context traces answer up to 20,000 whatever is set below that",
    "seeds": "comma-separated sampling seeds kept as snapshots (focus-context also keeps the "
             "seedless order, which a read without a seed gets; a read of the 2025 tree without a "
             "seed gets one of these)",
    "in_chunk": "ids per `IN (...)` statement",
    "focus_context_dedupe": "`across-depths` drops the notes Doughnut emits a second time at depth 2 "
                            "(a deliberate deviation; default: exactly Doughnut)",
    "redis_url": "the snapshot cache, Redis 7.0 or later (its writes publish on sharded pub/sub "
                 "channels; an ACL user needs those channels, `&<prefix>:changed:*`); use "
                 "`volatile-lru` (every key has a TTL); on a cluster, any node",
    "redis_prefix": "key prefix (one per deployment: it is bound to the database it was filled from, "
                    "\"One cache per database\")",
    "redis_timeout_ms": "socket timeout; one quick retry, then the reader computes live",
    "redis_cluster": "`true`: the snapshot cache is a Redis Cluster (the broker must then be "
                     "RabbitMQ or a separate Redis)",
    "strategies": "comma-separated strategies kept as snapshots",
    "layered_limits": "tokenLimits layered snapshots are kept for",
    "soft_ttl_s": "fresh for this long; then served stale while one refresh is queued (at most "
                  "`GRAPHRAG_HARD_TTL_S`)",
    "hard_ttl_s": "Redis expiry of a snapshot",
    "lock_ttl_ms": "per-snapshot live-compute lock: its expiry",
    "lock_wait_ms": "per-snapshot live-compute lock: how long other readers wait for it",
    "parsed_traces": "parsed traces a reader process keeps (about 80 KB each) so that a read at "
                     "another tokenLimit of a snapshot read before skips inflating and parsing "
                     "its trace; 0 keeps none",
    "kept_answers_mb": "MiB of answers replayed from traces a reader process keeps, so that the "
                       "same read again (note, tokenLimit, format) costs a hit, not a replay; 0 "
                       "keeps none",
    "decoded_values_mb": "MiB of stored snapshots a reader process keeps decoded, by their bytes, so "
                         "that a hit read again (its bytes read from Redis as always) is not "
                         "decoded again; 0 keeps none",
    "reader_token": "bearer token of the HTTP reader's own paths (and of `graphrag mcp --transport "
                    "http`); `serve` refuses to start without it unless "
                    "`GRAPHRAG_READER_AUTH=doughnut`, where the service's own paths then refuse "
                    "every request",
    "reader_auth": "who Doughnut's own paths read as on the internal listener: `shared` (the reader "
                   "token, the owner's view), `doughnut` (Doughnut's own users: their tokens and web "
                   "sessions, that user's view and Doughnut's refusals), `both` (\"Deploying beside "
                   "Doughnut\"); `doughnut` and `both` need today's Doughnut and `SELECT` on "
                   "`user_token`",
    "token_cache_s": "without change capture, seconds a Doughnut token's user and another "
                     "reader's verdict on a snapshot (or their own view of it) are remembered "
                     "(a revoked token is refused within this delay); with "
                     "`GRAPHRAG_CHANGE_SOURCE=cdc` they are kept until an access row changes, "
                     "within the feed's lag",
    "doughnut_url": "Doughnut's backend address, asked whose web session a request's cookie "
                    "carries; unset: such a request (a cookie, no known token) gets 503, which the "
                    "proxy hands to Doughnut",
    "session_cache_s": "seconds a web session's user is remembered (by the cookie's digest): a "
                       "signed-out session reads for at most this long",
    "doughnut_timeout_ms": "how long asking Doughnut about a session may take; then 503 (the proxy "
                           "hands the request to Doughnut)",
    "public_port": "`graphrag serve`'s public listener (`--public-port`): Doughnut's two paths with "
                   "Doughnut's credentials only, for the proxy; unset: one listener (`--port`) "
                   "serves everything",
    "header_timeout_s": "`serve` and `mcp --transport http` close a connection whose request head "
                        "takes longer",
    "access_log": "`serve` logs a line per request (off by default: the proxy in front logs every "
                  "request, and the line costs about a tenth of a hit's time in the server)",
    "mcp_max_subscriptions": "MCP: resource subscriptions one session may hold (past it: an error "
                             "naming it; about 8 KB each)",
    "mcp_max_listen_uris": "MCP: resources one `subscriptions/listen` may name (past it: an error "
                           "naming it)",
    "mcp_max_listens": "MCP: listen streams open at once, all clients together (a new one past it is "
                       "refused)",
    "mcp_max_sessions": "MCP over HTTP: sessions held at once (a new one past it is refused)",
    "mcp_session_idle_s": "MCP over HTTP: a session with no request for this long ends, and what it "
                          "held goes with it",
    "webhook_secret": "`whsec_<base64>` Standard Webhooks secret; without it the webhook answers 503",
    "webhook_max_events": "events per webhook request (more: 413)",
    "broker_url": "the Celery broker: a Redis with `noeviction`, or RabbitMQ "
                  "(`amqp://user:pass@host:5672/vhost`); `graphrag worker` and `graphrag beat` stop "
                  "with one line when it cannot be reached (runbook, \"Scaling out\": choosing the "
                  "broker)",
    "cdc_server_id": "`graphrag cdc`: its replication client id, unique among the database's replicas",
    "cdc_database_url": "`graphrag cdc`'s database URL: a user of its own with change capture's "
                        "grants (\"Deploying beside Doughnut\"); unset or empty: "
                        "`GRAPHRAG_DATABASE_URL`",
    "change_source": "what keeps snapshots current: `cdc` (change capture; a reader computes live "
                     "until its heartbeat appears), `webhook` (a signed sender; needs "
                     "`GRAPHRAG_WEBHOOK_SECRET`), `none` (only the nightly rebuild and the soft TTL), "
                     "`auto` (whichever is found; `/healthz` says when none is)",
    "cdc_lease_ms": "`graphrag cdc`: TTL of the lease that keeps it to one instance (a standby takes "
                    "over within it)",
    "delivery_limit": "RabbitMQ only: deliveries of one message before it is parked in "
                      "`<queue>.parked`; fixed when the queues are first declared (runbook, "
                      "\"Scaling out\")",
    "debounce_ms": "a dirty note is rebuilt once it has been quiet this long",
    "drain_batch": "a drain rebuilds at most this many dirty foci at once (a quarter of it from "
                   "a large edit's wide set); an edit's foci wait for at most about such a "
                   "quarter batch on a worker process busy with a wide set",
    "drain_budget_ms": "a drain task keeps its worker process for about this long (then the "
                       "batch it is in) before queueing its successor behind the events that "
                       "arrived meanwhile: how long an edit's event waits on a busy worker",
    "max_feed_lag_s": "with change capture: readers serve snapshots only while its heartbeat is "
                      "younger than this and it trails the database by less; otherwise every read "
                      "is computed live (`0`: never check)",
    "dirty_shards": "shards of the dirty set, spread over a Redis Cluster's primaries (workers "
                    "lease foci from any shard; safe to change at any time)",
    "nightly_hour_utc": "hour (UTC) of the nightly full rebuild",
    "worker_metrics_port": "`graphrag worker` serves Prometheus metrics on this port (`/metrics`: "
                           "drains, rebuilds, edit-to-fresh latency of all its pool processes, and "
                           "the dirty backlog, full-rebuild progress and cache memory read from "
                           "Redis; runbook, \"Read metrics\"); unset: none",
    "visibility_timeout_s": "Redis broker: a task not acknowledged this long after its delivery is "
                            "delivered again (more than 60 s above `GRAPHRAG_TASK_TIME_LIMIT_S`)",
    "task_time_limit_s": "the longest a task may run before it is killed",
    "max_bulk_backlog": "full-rebuild tasks queued ahead before the dispatcher waits",
    "rebuild_page": "note ids per epoch of a rebuild of given ids (a drain, `rebuild <ids>`): its "
                    "batches of 100 share what they loaded",
    "rebuild_piece_notes": "a full rebuild's piece: notebooks in order packed into pieces of up to "
                           "this many live notes (at most 50,000), each rebuilt by one task, its rows "
                           "loaded first; bounds that task's memory and time, which must stay within "
                           "`GRAPHRAG_TASK_TIME_LIMIT_S` (about 200 MB peak RSS for one piece at the "
                           "default and 15–30 s per piece on the bench graphs; pieces carried on in "
                           "one process hold more: `GRAPHRAG_PIECE_CARRY_FOCI`)",
    "carry_foci": "a worker process hands what one rebuild loaded on to the next while no edit is "
                  "recorded, for up to this many foci (`0`: never; memory grows with it)",
    "carry_age_ms": "how long after it was loaded a worker may still carry data on that way between "
                    "drains, and when an idle worker lets it go (a change no event announces is "
                    "never read from older data; a full rebuild's pieces have no age bound: a run "
                    "shows every change committed before it started, and one committed during it is "
                    "its event's to announce)",
    "piece_carry_foci": "a full rebuild's worker process carries its workspace from piece to piece "
                        "while no edit is recorded, for up to this many foci, so each note row is "
                        "read once per process per run (`0`: a workspace per piece); the memory "
                        "bound of a rebuilding process, about 9 KB per focus (850–910 MB peak RSS "
                        "over a whole 100k-note run); a drain in the same process lets it go, and so "
                        "does a process that saw no piece for `GRAPHRAG_PIECE_CARRY_IDLE_S`",
    "piece_carry_idle_s": "a worker process that took no full-rebuild piece for this long lets its "
                          "carried workspace go (the run is over; a `bulk`-only worker would "
                          "otherwise hold it until the next night)",
}
