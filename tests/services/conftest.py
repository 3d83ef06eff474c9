"""The service fixtures of :mod:`tests.services.plugin` are registered by the root conftest."""
