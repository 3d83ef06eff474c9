"""Doughnut today's wiki model (notes in folders and notebooks, wiki links) and focus-context."""
