"""The serving core: an ask's route from a request file to its response file, with no UI.

Packages are the stages (`docs/design/architecture.md`); the import-linter layers in `pyproject.toml` keep
each stage to the ones below it. Nothing here imports Textual, Rich or `tui`.
"""
