"""Jobs: lifecycle in the store (lifecycle, views), the job workspace with every file name
defined once (workspace), the gates between stages, the run manifest, provenance fingerprints,
and the model card.

May import: core.config, core.imaging, core.store, core.datasets.
"""
