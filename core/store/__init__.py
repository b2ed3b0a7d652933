"""The store: the SQLite file (db) that only parent processes (app, CLI, job worker) open,
and the read models drawn from it (curves, job listings); whether a job's process still runs
(liveness); its check, rolling backups and restore (backup); the errors it raises, each saying
what to do (errors); and opening the home folder with its store in one step (home).

May import: core.config.
"""
