"""Screens and dialogs: the main tabbed screen, task detail, help, and the control dialogs."""
