"""``graphrag worker``'s metrics endpoint is prepared before prometheus_client is imported
(worker.celery.metrics): in a fresh interpreter the library then keeps its values in files of the
worker's own directory, which is gone once the process exits; after the import it refuses, naming
the setting; without a port it does nothing. (Serving and adding up the pool processes runs in
tests/ops/test_monitoring_live.py.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import prometheus_client
import pytest

from graphrag.core.errors import ConfigurationError
from worker.celery.metrics import ENV, prepare
from worker.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
FRESH = """
from worker.settings import Settings
from worker.celery.metrics import prepare
prepare(Settings(worker_metrics_port=9))
import os, prometheus_client.values as values
print(os.environ["PROMETHEUS_MULTIPROC_DIR"], values.ValueClass.__name__, flush=True)
"""


def test_in_a_fresh_process_values_live_in_files_of_its_own_directory_removed_at_exit() -> None:
    done = subprocess.run([sys.executable, "-c", FRESH], capture_output=True, text=True, cwd=ROOT,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    directory, value_class = done.stdout.split()
    assert value_class == "MmapedValue"
    assert Path(directory).name.startswith("graphrag-worker-metrics-")
    assert not Path(directory).exists()


def test_after_prometheus_client_was_imported_it_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    assert prometheus_client.__name__ in sys.modules  # imported by this module, on purpose
    monkeypatch.delenv(ENV, raising=False)
    with pytest.raises(ConfigurationError, match="GRAPHRAG_WORKER_METRICS_PORT"):
        prepare(Settings(worker_metrics_port=9103))
    assert ENV not in os.environ


def test_without_a_port_it_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    prepare(Settings())
    assert ENV not in os.environ
