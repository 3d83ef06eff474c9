"""The HTTP reader: the process ``graphrag serve`` runs (uvicorn, one ASGI app).

It serves Doughnut's GraphRAGResult from snapshots (the service's paths and Doughnut's own, JSON
and markdown, conditional reads), takes Doughnut's signed note-edit webhook and hands its events
on (worker.enqueue), and reports health and metrics. Entry point:
:func:`worker.http.server.build_http_app` (settings in, the app out), over
:func:`worker.http.app.create_app` (the routes), :mod:`worker.http.webhook`,
:mod:`worker.http.conditional` and :mod:`worker.http.doughnut_paths`.
"""
