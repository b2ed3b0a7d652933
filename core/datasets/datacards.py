"""The datacard: a JSON description of one dataset.

It keeps the paper's three keys (``"dataset name"``, ``"dataset description"``,
``"dataset path"``) so paper-style cards load unchanged, adds structured fields, and keeps any
unknown field as it was. Cards are written atomically (temp file + rename): a failed save never
leaves a half-written card.
"""
from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

TASKS = ("diagnosis", "segmentation", "anomaly_detection", "report_generation")
TASK_ALIASES = {
    "classification": "diagnosis", "disease diagnosis": "diagnosis", "diagnosis": "diagnosis",
    "organ segmentation": "segmentation", "segmentation": "segmentation",
    "anomaly detection": "anomaly_detection", "anomaly_detection": "anomaly_detection",
    "lesion segmentation": "anomaly_detection", "detection": "anomaly_detection",
    "report generation": "report_generation", "report_generation": "report_generation",
}
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._()+-]{0,79}$")


class DatacardError(ValueError):
    """A datacard that cannot be used, with a message that says what to fix."""


class Datacard(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    name: str = Field(alias="dataset name")
    description: str = Field(default="", alias="dataset description")
    path: str = Field(default="", alias="dataset path")
    tasks: list[str] = Field(default_factory=list)
    modality: str = ""            # CT, MRI, X-ray, ...
    anatomy: str = ""             # chest, brain, ...
    dimension: Literal["2D", "3D", ""] = ""
    file_format: str = ""         # png, dicom, nifti, ...
    label_source: str = ""        # class_folders, table, filenames, masks, ...
    grouping_key: str = ""        # how images map to patients, e.g. "filename prefix patientNNNN"
    classes: list[str] = Field(default_factory=list)
    class_counts: dict[str, int] = Field(default_factory=dict)
    num_samples: int | None = None
    license: str = ""
    provenance: str = ""
    source: Literal["builtin", "registered", "demo"] = "registered"
    engine: Literal["", "monai", "nnunet"] = ""   # force a segmentation engine; "" = plan picks
    allow_pickle: bool = False    # volumes are Python pickles (.pck/.pkl): reading them runs code
    interpretation: str = ""      # the reading of the folder chosen at registration (reader name)
    # every target the folder offers (core.datasets.layouts.target_list): id, task, template,
    # classes, counts, coverage, grouping, split, examples and, for a records reading, its
    # recipe; the first is the default, a request binds one (core.planning.targets)
    targets: list[dict] = Field(default_factory=list)

    @field_validator("name")
    @classmethod
    def _name_ok(cls, value: str) -> str:
        value = value.strip()
        if not NAME_RE.match(value):
            raise ValueError("dataset name must be 1-80 characters: letters, digits, space, "
                             "'._()+-', starting with a letter or digit")
        return value

    @field_validator("tasks")
    @classmethod
    def _tasks_ok(cls, value: list[str]) -> list[str]:
        out = []
        for task in value:
            canonical = TASK_ALIASES.get(task.strip().lower().replace("-", " "))
            if canonical is None:
                raise ValueError(f"unknown task {task!r}; use one of {', '.join(TASKS)}")
            if canonical not in out:
                out.append(canonical)
        return out

    # ------------------------------------------------------------------ paths
    def resolved_path(self, datasets_dir: Path | None = None) -> Path:
        """Absolute dataset folder; relative paths are taken under the home's datasets/."""
        path = Path(os.path.expanduser(self.path)) if self.path else Path()
        if not path.is_absolute() and datasets_dir is not None:
            path = datasets_dir / path
        return path.resolve() if self.path else path

    def available(self, datasets_dir: Path | None = None) -> bool:
        return bool(self.path) and self.resolved_path(datasets_dir).is_dir()

    # ------------------------------------------------------------------ (de)serialisation
    def to_json_dict(self) -> dict[str, Any]:
        """Paper keys first, then structured fields, then the unknown ones kept as they came."""
        return self.model_dump(by_alias=True, mode="json")

    def slug(self) -> str:
        return re.sub(r"[^A-Za-z0-9._-]+", "_", self.name).strip("_") or "dataset"


def parse_datacard(data: dict[str, Any]) -> Datacard:
    try:
        return Datacard.model_validate(data)
    except Exception as exc:  # pydantic.ValidationError
        raise DatacardError(f"invalid datacard: {exc}") from exc


def load_datacard(path: str | Path) -> Datacard:
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise DatacardError(f"cannot read datacard {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise DatacardError(f"datacard {path} must hold a JSON object")
    return parse_datacard(data)


def write_json_atomic(path: str | Path, data: Any) -> Path:
    """Write JSON to a temp file in the same folder, fsync, then rename over the target."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2, ensure_ascii=False)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def save_datacard(card: Datacard, folder: Path) -> Path:
    return write_json_atomic(folder / f"{card.slug()}.json", card.to_json_dict())
