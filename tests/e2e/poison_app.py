"""The service's Celery app (``worker.celery.app``, from the environment's settings) plus one poison
task, for ``celery -A tests.e2e.poison_app worker`` in the RabbitMQ tests.

``graphrag.test.die`` appends its pid to the file named by its argument, then SIGKILLs the process
running it: a message no worker can ever finish, as one that crashes a C extension or runs out of
memory. Everything else (queues, delivery limit, parking, confirms) is exactly the service's.
"""

from __future__ import annotations

import os
import signal

from celery import Celery

from worker.celery.app import app

__all__ = ["app", "die"]

celery: Celery = app


@celery.task(name="graphrag.test.die")
def die(record_to: str) -> None:
    with open(record_to, "a", encoding="utf-8") as out:
        out.write(f"{os.getpid()}\n")
    os.kill(os.getpid(), signal.SIGKILL)
