"""The Celery worker and beat processes: ``celery -A worker.celery.app worker|beat`` (or ``graphrag
worker|beat``, which check the broker first).

The app is the one every process sees (:func:`worker.celery_app.create_celery`) with the tasks'
runtime registered: :func:`worker.celery.runtime.worker_app`, which every way of starting a worker
goes through (the ``celery -A`` entry :mod:`worker.celery.app`, the command line, the demo and the
tests). :mod:`worker.celery.runtime` also connects the worker's signal handlers (warm-up, parking
queues, the sweep at start); :mod:`worker.celery.idle` lets carried memory go when a process idles.
"""
