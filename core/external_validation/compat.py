"""Which model a user means, what it was trained to do, and whether a registered dataset is one
it can be scored on. Every refusal says what differs and what to do; nothing here writes.

Compatible means: the dataset offers the model's task and is read by the model's template; its
modality, anatomy and dimension (where both sides state them) agree; and its labels are the
model's — for diagnosis the dataset's classes are the model's classes or some of them, for
segmentation the same structures (in any order: the masks are renumbered to the model's). Names
match ignoring case, spaces, hyphens and underscores.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from core.datasets.catalog import CatalogEntry, load_catalog
from core.datasets.vocabulary import (anatomy_ancestors, canonical_anatomy, canonical_modality,
                                      modality_ancestors)
from core.jobs.workspace import JobWorkspace
from core.planning.tasks import template_for
from core.store.db import Store
from core.viewing.model_views import workspace_of

SUPPORTED_TEMPLATES = ("diagnosis", "segmentation")
LATEST = ("latest", "last", "newest")


class ExternalValidationError(ValueError):
    """The evaluation cannot run as asked; the message says what differs and what to do."""


@dataclass
class ModelFacts:
    """What a stored model was trained to do, read from its job folder."""
    id: str
    name: str
    job_id: str
    workspace: Path
    template: str
    task: str
    dataset: str
    modality: str = ""
    anatomy: str = ""
    dimension: str = ""
    classes: list[str] = field(default_factory=list)  # index order (mask values 1..N)
    multi_label: bool = False
    engine: str = ""


def label_key(name: str) -> str:
    return re.sub(r"[\s_\-]+", "", str(name)).lower()


def _json(path: Path):
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


# ----------------------------------------------------------------------------- the model

def find_model(store: Store, ref: str) -> dict:
    """The stored model ``ref`` names: its id (the job id), its name (as the Models page shows
    it, ``<dataset> <task> v<N>``), the name it had before versions (the newest of equal
    names) or "latest". Raises ExternalValidationError."""
    models = store.models()
    if not models:
        raise ExternalValidationError("there is no trained model yet: build one first "
                                      "(`python -m crew build` or the Build a model page)")
    wanted = (ref or "").strip()
    if not wanted or wanted.lower() in LATEST:
        return models[0]
    for model in models:
        if model["id"] == wanted or model["job_id"] == wanted:
            return model
    for field in ("name", "former_name"):
        named = [m for m in models if (m.get(field) or "").strip().lower() == wanted.lower()]
        if named:
            return named[0]
    listed = "; ".join(f"{m['id']} ({m['name']})" for m in models[:8])
    raise ExternalValidationError(f"no model is called {wanted!r}; give a model id or name "
                                  f"(`python -m crew jobs` lists jobs), e.g. {listed}")


def model_facts(model: dict, job: dict | None) -> ModelFacts:
    ws = JobWorkspace(workspace_of(model, job))
    plan = _json(ws.plan) or {}
    config = _json(ws.train_config) or {}
    loader = _json(ws.dataloader_config) or {}
    template = config.get("template") or plan.get("template") or ""
    if template == "segmentation":
        train = _json(ws.train_index) or []
        classes = max((list(e.get("labels") or []) for e in train if isinstance(e, dict)),
                      key=len, default=[])
        dims = loader.get("SPATIAL_DIMS")
    else:
        label_dict = _json(ws.label_dict) or {}
        classes = sorted(label_dict, key=label_dict.get)
        dims = len(loader.get("IMAGE_SIZE") or config.get("image_size") or []) or None
    dimension = plan.get("dimension") or (f"{dims}D" if dims in (2, 3) else "")
    return ModelFacts(model["id"], model["name"], model["job_id"], ws.root, template,
                      plan.get("task") or model.get("task") or "", plan.get("dataset")
                      or model.get("dataset") or "", plan.get("modality") or "",
                      plan.get("anatomy") or "", dimension, classes,
                      bool(loader.get("MULTI_LABEL")), config.get("engine") or "")


# ----------------------------------------------------------------------------- the dataset

def _related(a: str, b: str, ancestors) -> bool:
    return a.lower() == b.lower() or a in ancestors(b) or b in ancestors(a)


def check_dataset(facts: ModelFacts, entry: CatalogEntry | None, name: str,
                  available_names: list[str]) -> str:
    """What the datacard says, before the folder is read: the template the dataset is read by
    (the model's). Raises ExternalValidationError naming what differs."""
    if entry is None:
        raise ExternalValidationError(
            f"no registered dataset is called {name!r}; registered: "
            f"{', '.join(available_names) or 'none'}. Register it first (Datasets page or "
            "`python -m crew register PATH --name NAME`)")
    card = entry.card
    if not entry.available:
        raise ExternalValidationError(f"dataset {card.name!r} is registered but its folder "
                                      f"{entry.dataset_path} does not exist")
    if facts.template not in SUPPORTED_TEMPLATES or facts.engine == "nnunet":
        what = "nnU-Net" if facts.engine == "nnunet" else facts.template.replace("_", " ")
        raise ExternalValidationError(f"scoring a {what} model on another dataset is not "
                                      "supported yet (supported: MONAI diagnosis and "
                                      "segmentation models)")
    if card.name.lower() == (facts.dataset or "").lower():
        raise ExternalValidationError(
            f"{card.name!r} is the dataset this model was trained on; its held-out test set is "
            "the internal result already. Choose another registered dataset")
    if facts.task not in card.tasks:
        raise ExternalValidationError(
            f"{card.name!r} offers {', '.join(card.tasks) or 'no task'}, and this model does "
            f"{facts.task.replace('_', ' ')}: choose a dataset registered for "
            f"{facts.task.replace('_', ' ')}")
    template = template_for(facts.task, card.label_source)
    if template != facts.template:
        raise ExternalValidationError(
            f"{card.name!r} is labelled for the {template or 'unknown'} template ("
            f"{card.label_source or 'label source not stated'}), this model is a "
            f"{facts.template} model")
    if card.modality and facts.modality and not _related(
            canonical_modality(card.modality), canonical_modality(facts.modality),
            modality_ancestors):
        raise ExternalValidationError(f"modality differs: the model was trained on "
                                      f"{facts.modality} images, {card.name!r} holds "
                                      f"{card.modality} images")
    if card.anatomy and facts.anatomy and not _related(
            canonical_anatomy(card.anatomy), canonical_anatomy(facts.anatomy),
            anatomy_ancestors):
        raise ExternalValidationError(f"anatomy differs: the model was trained on "
                                      f"{facts.anatomy} images, {card.name!r} shows "
                                      f"{card.anatomy}")
    if card.dimension and facts.dimension and card.dimension != facts.dimension:
        raise ExternalValidationError(f"dimension differs: the model takes {facts.dimension} "
                                      f"images, {card.name!r} holds {card.dimension} images")
    if card.classes and facts.classes:  # what the card states; the scan's labels decide later
        _label_mapping(facts, card.name, card.classes)
    return template


def _label_mapping(facts: ModelFacts, dataset: str, classes: list[str]) -> dict[str, str]:
    known = {label_key(c): c for c in facts.classes}
    mapping = {c: known[label_key(c)] for c in classes if label_key(c) in known}
    unknown = [c for c in classes if c not in mapping]
    what = "classes" if facts.template == "diagnosis" else "labelled structures"
    if unknown:
        raise ExternalValidationError(
            f"{dataset!r} has {what} this model does not know: {', '.join(unknown)} (the model "
            f"knows {', '.join(facts.classes)}); an external set must use the model's {what}")
    return mapping


def check_labels(facts: ModelFacts, dataset: str, classes: list[str], dimension: str,
                 multi_label: bool) -> dict[str, str]:
    """The dataset's labels (as its scan read them) against the model's: returns each dataset
    label's model name. Raises ExternalValidationError naming the labels that differ."""
    if dimension and facts.dimension and dimension != facts.dimension:
        raise ExternalValidationError(f"dimension differs: the model takes {facts.dimension} "
                                      f"images, {dataset!r} holds {dimension} images")
    mapping = _label_mapping(facts, dataset, classes)
    what = "classes" if facts.template == "diagnosis" else "labelled structures"
    if not mapping:
        raise ExternalValidationError(f"{dataset!r} has no {what} the scan could read")
    if facts.template == "segmentation" and len(set(mapping.values())) != len(facts.classes):
        missing = [c for c in facts.classes if c not in mapping.values()]
        raise ExternalValidationError(
            f"{dataset!r} does not label {', '.join(missing)}, which this model segments: a "
            "structure left unlabelled would count the model's masks of it as errors")
    if facts.template == "diagnosis" and multi_label != facts.multi_label:
        raise ExternalValidationError(
            f"this model is {'multi' if facts.multi_label else 'single'}-label and {dataset!r} "
            f"is {'multi' if multi_label else 'single'}-label (one class per image or several)")
    return mapping


def candidate_datasets(settings, facts: ModelFacts) -> tuple[list[str], dict[str, str]]:
    """The available registered datasets this model may be scored on, by what their datacards
    say (the labels are checked when the folder is read), and why each other one may not."""
    fits, refused = [], {}
    entries = [e for e in load_catalog(settings) if e.available]
    names = [e.card.name for e in entries]
    for entry in entries:
        if entry.card.name.lower() == (facts.dataset or "").lower():
            continue
        try:
            check_dataset(facts, entry, entry.card.name, names)
        except ExternalValidationError as exc:
            refused[entry.card.name] = str(exc)
        else:
            fits.append(entry.card.name)
    return fits, refused
