"""The fixture the modules on the bundled 2026 sample share: the test's database (SQLite or MariaDB,
``engine`` of tests/conftest.py) with the sample loaded."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import Engine

from storage.profiles.sample_2026 import load_sample_2026


@pytest.fixture
def sample_engine(engine: Engine) -> Engine:
    """``engine`` with the 2026 sample loaded."""
    load_sample_2026(engine)
    return engine
