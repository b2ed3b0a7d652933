"""Generality check: ten public-dataset layouts registered through the CLI (see README.md)."""
