"""Widgets of the authorizer app."""
