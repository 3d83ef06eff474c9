"""The command line: ``graphrag`` (the entry point :func:`worker.cli.main.main`).

:mod:`worker.cli.main` declares the commands with click and imports only the pure package up
front; what a command does lives in :mod:`worker.cli.commands` (and ``context --follow``'s loop in
:mod:`worker.cli.follow`), imported when it runs. The command line starts the other surfaces'
processes (``serve``, ``mcp``, ``cdc``, ``worker``, ``beat``), so it alone may import them, lazily.
"""
