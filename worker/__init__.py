"""The composition root, and the processes built on it: one subpackage per surface.

The root turns settings into wired objects; nothing below ``worker`` (tasks, storage, service,
graphrag) reads a setting. Its top level holds that and only what several surfaces share:

* :mod:`worker.settings`: every ``GRAPHRAG_*`` variable and ``CELERY_BROKER_URL``, checked at start;
* :mod:`worker.compose`: :class:`~worker.compose.Wiring`, the adapters and use cases of one process;
* :mod:`worker.celery_app`: the Celery app as every process sees it, the processes that only send
  tasks included (no runtime: that is the Celery surface's);
* :mod:`worker.broker`: the broker half of Celery's configuration (Redis or RabbitMQ);
* :mod:`worker.enqueue`: handing note events on to the workers (the webhook and change capture);
* :mod:`worker.gate`: the bearer gate in front of the HTTP reader and MCP's HTTP transport;
* :mod:`worker.refresh`: refreshing stale snapshots in the background (HTTP and MCP);
* :mod:`worker.feed_watch`: the change feed's verdict, kept current from a thread (the reader's).

The surfaces, each a process (or a family of them) with its entry point named in its package:

* :mod:`worker.http`: the HTTP reader (``graphrag serve``): snapshots, webhook, health, metrics;
* :mod:`worker.mcp`: the MCP server (``graphrag mcp``, stdio or streamable HTTP);
* :mod:`worker.cdc`: change capture (``graphrag cdc``), following the database's binary log;
* :mod:`worker.celery`: the Celery worker and beat processes (``celery -A worker.celery.app``);
* :mod:`worker.cli`: the command line (``graphrag``), which also starts the other surfaces.

The import rule (import-linter's contracts in pyproject.toml): a surface imports the root and its
own modules, never another surface; only :mod:`worker.cli` imports surfaces (lazily, when a
command runs), and the root imports none.
"""
