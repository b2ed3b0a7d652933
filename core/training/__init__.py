"""Training: the job's dataloader from its template (dataloader, instantiate), the training
config from plan + template defaults (config), the command that runs a template (launch), the
run itself (run: start the child through a launcher the caller gives, tail its channel, turn a
stop request into its stop file), and the channel's reading end (channel: JSON lines the parent
validates and writes to the store; the child never opens the store).

May import: core.config, core.store, core.datasets, core.jobs, core.planning, core.evaluation.
"""
