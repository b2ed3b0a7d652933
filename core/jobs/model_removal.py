"""Deleting a model for good: its files in its job's folder (the saved model, the exports, the
training checkpoints, its external validations and its model card) and its row in the store,
with an audit row naming what was removed. The job's record, logs, test report and indexes stay
(the Training page still shows the run), and so does its version number, which is never given
again. Never a dataset: every path removed lies inside the job's folder under the home's jobs
folder and neither inside nor above a registered dataset's folder; a link is removed as a link,
never followed.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from core.jobs.workspace import JobWorkspace

ACTIVE = ("queued", "running", "awaiting_approval")


class ModelRemovalError(Exception):
    """Why a model was not deleted, said so the user can act on it."""


def model_workspace(settings, model: dict, job: dict | None) -> JobWorkspace:
    return JobWorkspace(Path((job or {}).get("workspace") or settings.jobs_dir / model["job_id"]))


def model_files(ws: JobWorkspace) -> list[Path]:
    """The model's files and folders that exist (what deleting it removes)."""
    return [p for p in (ws.model_dir, ws.exports, ws.checkpoints, ws.external, ws.model_card)
            if p.is_symlink() or p.exists()]


def size_of(paths: list[Path]) -> int:
    total = 0
    for path in paths:
        if path.is_symlink() or path.is_file():
            total += path.lstat().st_size
        elif path.is_dir():
            total += sum(f.lstat().st_size for f in path.rglob("*") if f.is_file()
                         and not f.is_symlink())
    return total


def _where(path: Path) -> Path:
    """The path itself resolved, a link's own location (not its target)."""
    return path.parent.resolve() / path.name if path.is_symlink() else path.resolve()


def _check(settings, store, ws: JobWorkspace, targets: list[Path]) -> None:
    jobs = settings.jobs_dir.resolve()
    root = ws.root.resolve()
    if root == jobs or not root.is_relative_to(jobs):
        raise ModelRemovalError(f"its job folder {ws.root} is not inside this home's jobs "
                                "folder, so nothing was deleted; remove the model's files "
                                "by hand if you want them gone")
    datasets = [Path(c["path"]).expanduser().resolve() for c in store.datacards()
                if c.get("path")]
    for path in targets:
        where = _where(path)
        if not where.is_relative_to(root):
            raise ModelRemovalError(f"{path.name} leads out of the job folder, so nothing was "
                                    "deleted")
        clash = next((d for d in datasets if where.is_relative_to(d) or d.is_relative_to(where)),
                     None)
        if clash is not None:
            raise ModelRemovalError(f"{path.name} lies in or around the registered dataset "
                                    f"folder {clash}; datasets are never deleted, so nothing "
                                    "was")


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def delete_model(settings, store, model_id: str, actor: str = "user") -> dict:
    """Delete a model's files and row (audited). Returns {"name", "removed": [names],
    "bytes"}. Raises ModelRemovalError (nothing deleted) when its job still runs or a path
    is not the model's to remove."""
    model = store.model(model_id)
    if model is None:
        raise ModelRemovalError("there is no such model (already deleted?)")
    job = store.job(model["job_id"]) or {}
    if job.get("status") in ACTIVE:
        raise ModelRemovalError(f"{model['name']} cannot be deleted while its job is still "
                                f"{job['status'].replace('_', ' ')}: wait for it to end or "
                                "stop it on the Training page")
    ws = model_workspace(settings, model, job)
    targets = model_files(ws)
    _check(settings, store, ws, targets)
    size = size_of(targets)
    removed = []
    try:
        for path in targets:
            _remove(path)
            removed.append(str(path.relative_to(ws.root)))
    except OSError as exc:
        store.audit(actor, "delete_model_failed", model_id,
                    f"removed {removed}; stopped at {path.name}: {exc.strerror or exc}")
        raise ModelRemovalError(f"{path.name} could not be removed ({exc.strerror or 'error'}); "
                                "the model is kept: check the folder's permissions and try "
                                "again") from None
    store.delete_model(model_id, actor, {"files": removed, "bytes": size})
    return {"name": model["name"], "removed": removed, "bytes": size}
