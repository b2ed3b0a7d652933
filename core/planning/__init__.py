"""Planning: reading a request (matching), the task table (tasks), building the plan (plan)
and the user's edits to it before approval (plan_edits).

May import: core.config, core.imaging, core.store, core.datasets, core.jobs.
"""
