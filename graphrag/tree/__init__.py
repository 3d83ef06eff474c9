"""Doughnut 2025's note tree and its strategies: wavefront, layered, relationship-bfs."""
