"""The use cases of the snapshot service, written against declared ports (:mod:`service.ports`).

Live compute (:mod:`service.context`), rebuilds (:mod:`service.rebuild`), which snapshots an edit
affects (:mod:`service.events`), draining the dirty set (:mod:`service.drain`), the nightly
dispatcher (:mod:`service.dispatch`), the reader (:mod:`service.reader`) and the audit
(:mod:`service.audit`). Nothing here imports a database or Redis driver: adapters live in
``storage`` and are wired in by the composition root (``worker``); see docs/architecture.md.
"""
