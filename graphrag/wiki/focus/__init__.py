"""The focus-context strategy: Doughnut's FocusContext traced once, cut for any budget, rendered."""
