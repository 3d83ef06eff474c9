"""Change capture: the process ``graphrag cdc`` runs, one instance at a time.

It follows the database's binary log and hands the events of every committed change on as the
webhook does (worker.enqueue), storing its position only after. Entry point:
:func:`worker.cdc.capture.run_cdc`; :mod:`worker.cdc.lag` measures how far it is behind the server
and writes the heartbeat the readers trust snapshots by (service.feed).
"""
