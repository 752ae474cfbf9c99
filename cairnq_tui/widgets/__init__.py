"""Reusable pieces of the console: keyed tables, JSON trees, the status bar, the views."""
