"""The public listener's app: Doughnut's two context paths with Doughnut's credentials, nothing else.

What the shipped proxy points at (``GRAPHRAG_PUBLIC_PORT``; docs: "Listeners"). Requests come from
Doughnut's clients (its MCP server, its CLI, its web app through its own host name), so only
Doughnut's rules apply: a bearer token of ``user_token``, else the web session's user, else nobody
(service.sessions), whatever ``GRAPHRAG_READER_AUTH`` says for the internal listener. The service's
shared token is no credential here (an unknown token to Doughnut's rule), ``?viewer=`` is ignored as
Doughnut ignores unknown parameters, and the service's own paths, ``/metrics``, ``/healthz``, the
webhook and the API's description are not served (404): they stay on the internal listener.
"""

from __future__ import annotations

from graphrag import InvalidParameter
from service.reader import Served, SnapshotReader
from worker.http.app import install_error_handlers, respond
from worker.http.doughnut_paths import GRAPH, DoughnutAuth, DoughnutQuery, install
from worker.http.front import Fronted
from worker.http.hot import HotReads

__all__ = ["create_public_app"]


def _no_shared_reads(note_id: str, q: DoughnutQuery, fmt: str) -> Served:
    raise InvalidParameter("authorization", "the shared token reads on the internal listener only")


def create_public_app(reader: SnapshotReader, auth: DoughnutAuth) -> Fronted:
    """Doughnut's paths for Doughnut's users (``auth.public()``: no shared token, ever)."""
    app = Fronted(title="Doughnut's note context paths", version="1", openapi_url=None,
                  docs_url=None, redoc_url=None)
    hot = install(app, reader, auth.public(), _no_shared_reads, respond)
    install_error_handlers(app)
    app.add_front(HotReads, reads=[(GRAPH, hot)], respond=respond)
    return app
