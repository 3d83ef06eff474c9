"""The MCP server: the process ``graphrag mcp`` runs, over stdio or streamable HTTP.

Doughnut's ``get_note_graph`` tool and ``get_note_context_markdown``, both answered by the snapshot
reader, and each note's context as a resource agents can read and subscribe to. Entry point:
:func:`worker.mcp.server.main` (the process; :func:`worker.mcp.server.build_server` the server),
over :mod:`worker.mcp.source` (what the tools read through), :mod:`worker.mcp.texts` and
:mod:`worker.mcp.errors` (what agents see), :mod:`worker.mcp.http` (the HTTP transport behind the
bearer gate), and :mod:`worker.mcp.resources`, :mod:`worker.mcp.subscriptions` and
:mod:`worker.mcp.watch` (resources and their subscriptions).
"""
