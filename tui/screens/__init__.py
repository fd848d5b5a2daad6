"""Screens of the authorizer app."""
