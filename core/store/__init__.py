"""The store: the SQLite file (db) that only parent processes (app, CLI, job worker) open,
and the read models drawn from it (curves, job listings).

May import: core.config.
"""
