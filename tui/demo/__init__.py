"""Simulated children for `pi-authorizer demo` and the screenshots: they write real request files, as a
pi child does, and read the answers; the scenarios they ask."""
