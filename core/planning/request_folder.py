"""A request that names a dataset folder ("build a pneumonia classifier from /data/cxr"): the
folder registered (or its card found) and the job bound to that dataset, in one step.

:func:`start_request` is what the Chat page and ``python -m crew build`` call, in the parent
(the store's one writer), before any job runs:

1. the folders the request names are found (core.planning.folder_mention); none: a plain job;
2. the folder must exist, be a readable folder and pass the folder safety rules
   (core.datasets.folder_safety: never a system folder, a home folder, the app's repository or
   its workspaces); otherwise :class:`RequestFolderError` names the path and what to do, and
   nothing is registered;
3. a datacard whose folder is the same one (after links) is used as it is; otherwise the folder
   is registered through ``register_dataset`` like the Datasets page does, named after the
   folder and described by what the request says about the data;
4. when the folder can be read more than one way, nothing is saved and the readings come back
   (status ``needs_choice``): the caller asks the user, then calls again with
   ``interpretation``;
5. the job is created bound to the dataset: the Task Manager plans with it alone
   (:func:`rank_bound`), since the user named it.

May import: core.config, core.store, core.datasets, core.jobs, core.planning.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from core.config.settings import Settings
from core.datasets.catalog import CatalogEntry, find_entry, load_catalog
from core.datasets.datacards import NAME_RE
from core.datasets.drafting import propose_name
from core.datasets.folder_safety import DatasetRootError, check_dataset_folder
from core.datasets.registration import register_dataset
from core.jobs.lifecycle import JobError, check_request, create_job
from core.planning.folder_mention import FolderMention, find_folder_mentions, without_mentions
from core.planning.matching import rank_datacards
from core.store.db import Store

REGISTER_ELSEWHERE = ("register the data on the Datasets page (or `python -m crew register "
                      "PATH --name NAME`) and ask again")


class RequestFolderError(JobError):
    """The folder the request names cannot be used; the message names it and what to do.
    Nothing was registered and no job was created."""


def _one_mention(request: str, settings: Settings) -> FolderMention | None:
    mentions = find_folder_mentions(request, settings.datasets_dir)
    if not mentions:
        return None
    real = {os.path.realpath(m.path) for m in mentions}
    if len(real) > 1:
        raise RequestFolderError(
            "the request names more than one folder ("
            + ", ".join(repr(m.written) for m in mentions)
            + "); name the one folder that holds the dataset to train on")
    return mentions[0]


def _checked_folder(settings: Settings, mention: FolderMention) -> Path:
    """The mentioned folder's real path; RequestFolderError when it cannot be a dataset's."""
    path, written = mention.path, mention.written
    where = f"{written!r}" + (f" ({path})" if str(path) != written else "")
    if not os.path.exists(path):  # os.path: a name too long does not exist either
        raise RequestFolderError(
            f"the folder {where} named in the request does not exist on this server; check the "
            "path (it must be a folder on the machine running M3Builder, not on your computer)"
            f", or {REGISTER_ELSEWHERE}")
    if not os.path.isdir(path):
        raise RequestFolderError(
            f"{where} named in the request is a file, not a folder; name the folder that holds "
            "the dataset's images (a .zip is uploaded on the Datasets page)")
    try:
        real = check_dataset_folder(settings, path)
    except DatasetRootError as exc:
        raise RequestFolderError(
            f"the folder {where} named in the request cannot be a dataset: "
            + str(exc).replace(" and plan again", "")) from None
    if not os.access(real, os.R_OK | os.X_OK):
        raise RequestFolderError(
            f"the folder {real} named in the request cannot be read by M3Builder (permission "
            "denied); give its user read access and ask again")
    return real


def cards_of_folder(settings: Settings, real: Path) -> list[CatalogEntry]:
    """The registered (or built-in) datacards whose folder is ``real`` after links."""
    return [e for e in load_catalog(settings)
            if e.available and os.path.realpath(e.dataset_path) == str(real)]


def free_name(settings: Settings, folder: Path) -> str:
    """A name for a new card of ``folder``: the folder's, numbered when another card (or its
    file) has it already."""
    base = propose_name(folder)
    for n in range(1, 100):
        name = base if n == 1 else f"{base[:76]} {n}"
        slug = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "dataset"  # Datacard.slug
        slug_file = settings.datacards_dir / f"{slug}.json"
        if NAME_RE.match(name) and find_entry(settings, name) is None and not slug_file.exists():
            return name
    raise RequestFolderError(f"no free dataset name for the folder {folder}; "
                             f"{REGISTER_ELSEWHERE}")


def resolve_folder(settings: Settings, store: Store, request: str,
                   interpretation: int | str | None = None) -> dict:
    """The dataset the request names by its folder. Returns {"status": "none"} (no folder
    named), {"status": "existing" | "registered", "dataset", "path", "written", "registration"}
    or {"status": "needs_choice", "path", "written", "name", "interpretations", "message",
    "registration"}. RequestFolderError when the folder cannot be used or registered."""
    mention = _one_mention(request, settings)
    if mention is None:
        return {"status": "none"}
    real = _checked_folder(settings, mention)
    found = {"path": str(real), "written": mention.written}
    cards = cards_of_folder(settings, real)
    if cards:
        chosen = rank_datacards(without_mentions(request, [mention]),
                                [(e.card, True) for e in cards])["chosen"]
        name = chosen or cards[0].card.name
        return {**found, "status": "existing", "dataset": name, "registration": None}
    name = free_name(settings, real)
    description = without_mentions(request, [mention]) or request
    result = register_dataset(settings, store, str(real), name, description,
                              interpretation=interpretation, new_only=True)
    if result["status"] == "needs_choice":
        why = re.search(r"more than one way \((.*)\); nothing was saved",
                        " ".join(result["errors"]))
        return {**found, "status": "needs_choice", "name": name,
                "interpretations": result.get("interpretations", []),
                "message": (f"the folder {real} can be read in more than one way"
                            + (f" ({why.group(1)})" if why else "") + "; nothing was "
                            "registered yet: choose the reading that is right and the request "
                            "goes on with it"),
                "registration": result}
    if result["status"] != "registered":
        raise RequestFolderError(
            f"the folder {real} named in the request could not be registered as a dataset: "
            + "; ".join(result["errors"] or ["no reason was given"])
            + f". Nothing was saved; fix the folder, or {REGISTER_ELSEWHERE}")
    store.audit("user", "register_from_request", result["name"], f"path={real}")
    return {**found, "status": "registered", "dataset": result["name"], "registration": result}


def start_request(settings: Settings, store: Store, request: str, llm: str,
                  auto_approve: bool = False, interpretation: int | str | None = None) -> dict:
    """Create the job for a request, registering (or finding) the folder it names first.
    Returns {"status": "created", "job_id", "folder"} or, when the folder's reading must be
    chosen, {"status": "needs_choice", "job_id": None, "folder"} (nothing saved, no job).
    JobError (RequestFolderError for the folder) when no job can be created."""
    request = check_request(request)
    folder = resolve_folder(settings, store, request, interpretation)
    if folder["status"] == "needs_choice":
        return {"status": "needs_choice", "job_id": None, "folder": folder}
    if interpretation not in (None, "") and folder["status"] != "registered":
        raise RequestFolderError(
            "a reading (--interpretation) was given, but "
            + ("the request names no folder to register" if folder["status"] == "none" else
               f"the folder {folder['path']} is registered already (as {folder['dataset']!r}),"
               " so its card's reading is used; leave the reading out"))
    job_id = create_job(settings, store, request, llm, auto_approve=auto_approve,
                        bound_dataset=folder.get("dataset") or "")
    return {"status": "created", "job_id": job_id, "folder": folder}


def folder_note(folder: dict) -> str:
    """One line saying what became of the folder a request named ('' when none)."""
    if folder.get("status") == "registered":
        return (f"registered the folder {folder['path']} as the dataset "
                f"{folder['dataset']!r}; the plan uses it")
    if folder.get("status") == "existing":
        return (f"the folder {folder['path']} is the registered dataset "
                f"{folder['dataset']!r}; the plan uses it")
    return ""


def rank_bound(request: str, card, available: bool, datasets_dir: Path) -> dict:
    """rank_datacards' answer for a job bound to ``card`` (the request named its folder): only
    that card is considered. The user named it, so nothing is needed to tie it to the request;
    a real difference (task, output, modality, anatomy, dimension, its folder gone) still
    rules it out, and the explanation says so."""
    mentions = find_folder_mentions(request, datasets_dir)
    text = without_mentions(request, mentions) or request
    ranking = rank_datacards(text, [(card, available)])
    ranking["bound"] = card.name
    named = "the request names its folder"
    if ranking["chosen"]:
        ranking["explanation"] = f"{named}. " + ranking["explanation"]
        return ranking
    candidate = ranking["candidates"][0]
    differs = [k for k, v in candidate["criteria"].items() if v == "differs"]
    if not differs:
        candidate["eligible"] = True
        reasons = [r for r in candidate["reasons"]
                   if not r.startswith(("nothing ties", "untied:"))]
        ranking.update(chosen=card.name, target=candidate.get("target") or "",
                       nearest=None, differences=[], nearest_text="",
                       explanation=f"Chose {card.name}: {named}, and nothing in it differs "
                                   "from the request"
                                   + (f" ({'; '.join(reasons)})" if reasons else ""))
        return ranking
    ranking["explanation"] = (
        f"The request names the folder of the dataset {card.name!r}, but it cannot serve the "
        "request: " + "; ".join(candidate["differences"]) + ". Reword the request for what the "
        "folder holds, or name another folder.")
    return ranking
