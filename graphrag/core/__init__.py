"""The shared core of every graph model: errors, registry, parameters, batch driver, token counters."""
