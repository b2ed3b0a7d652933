"""Training: the training config from plan + template defaults (config), the command that
runs a template (launch), and the channel a training child reports through (channel: JSON lines
the parent tails, validates and writes to the store; a stop file the child watches).

May import: core.config, core.store, core.datasets, core.jobs, core.planning.
"""
