"""External validation for every entry point (``python -m crew evaluate``, the chat, the Models
page): the core stage (core.external_validation.run) with the child started the way a job's
template children are — through the process set-up, bounded in time and, when the model's job
ran with an LLM (its dataloader may be an LLM's code), confined by Landlock to its job folder
with the external dataset read-only. The calling process writes the store."""
from __future__ import annotations

from functools import partial

from core.config.settings import Settings
from core.external_validation.compat import ExternalValidationError, find_model
from core.external_validation.run import evaluate_external
from core.datasets.catalog import find_entry
from core.store.db import Store
from runtime.process import run_module
from tools.confinement import confinement_for
from tools.context import JobContext, ToolError


def child_runner(settings: Settings, store: Store, job_id: str, dataset_path: str):
    ctx = JobContext(settings, store, job_id, "")
    try:
        confine = confinement_for(ctx, extra_read=(dataset_path,))
    except ToolError as exc:
        raise ExternalValidationError(str(exc)) from exc
    return partial(run_module, confine=confine, scratch=ctx.workspace.scratch)


def evaluate_on_dataset(settings: Settings, store: Store, model: str, dataset: str,
                        request: str = "", actor: str = "user") -> dict:
    """Score the model ``model`` names (id, name or "latest") on the registered ``dataset``;
    returns the external report. Raises ExternalValidationError with what to do."""
    found = find_model(store, model)
    entry = find_entry(settings, dataset or "")
    runner = child_runner(settings, store, found["job_id"],
                          str(entry.dataset_path) if entry else "")
    return evaluate_external(settings, store, found["id"], dataset, runner, request=request,
                             actor=actor)
