"""Data Engineer tools: look at the planned dataset (read-only), write the index files."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from core.datasets.catalog import find_entry
from core.datasets.splitting import IndexBuildError
from core.planning.plan_edits import user_edits
from core.datasets.layouts.types import ScanError, ScanResult
from core.datasets.layouts.dispatch import scan_folder
from core.planning.tasks import write_index
from tools.base import M3Tool, NoArgs
from tools.context import ToolError
from tools.gates import index_gate


def _planned_dataset(ctx) -> Path:
    plan = ctx.plan()
    if plan.get("status") != "ready":
        raise ToolError("the plan has no dataset; nothing to index")
    return Path(plan["dataset_path"])


def _planned_description(ctx) -> str:
    """The planned dataset's datacard description (columns, codes, sample caps)."""
    entry = find_entry(ctx.settings, ctx.plan()["dataset"])
    return entry.card.description if entry else ""


def _planned_scan(ctx) -> ScanResult:
    """Scan the planned dataset, helped by its datacard's description (columns, codes, caps)."""
    return scan_folder(_planned_dataset(ctx), _planned_description(ctx))


MAX_PREVIEW_BYTES = 8192
# (items kept per list/dict, characters kept per string), tried in turn until the JSON fits
_SHRINK_STEPS = ((50, 300), (20, 200), (10, 120), (5, 80), (3, 60), (2, 40), (1, 30))


def _shrink(value: Any, items: int, chars: int) -> Any:
    if isinstance(value, str):
        return value if len(value) <= chars else value[: chars - 3] + "..."
    if isinstance(value, dict):
        keys = list(value)
        out = {str(k): _shrink(value[k], items, chars) for k in keys[:items]}
        if len(keys) > items:
            out["..."] = f"{len(keys) - items} more entries"
        return out
    if isinstance(value, (list, tuple)):
        out = [_shrink(v, items, chars) for v in value[:items]]
        if len(value) > items:
            out.append(f"... {len(value) - items} more")
        return out
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return _shrink(str(value), items, chars)


def bounded(data: dict, max_bytes: int = MAX_PREVIEW_BYTES) -> dict:
    """The same preview, cut until its JSON is at most ``max_bytes`` whatever the dataset's
    size: every top-level key stays; long lists and dicts inside keep their first entries (and
    say how many were left out), long strings are cut. What an agent reads stays small."""
    if len(json.dumps(data, default=str)) <= max_bytes:
        return data
    for items, chars in _SHRINK_STEPS:
        out = {str(k): _shrink(v, items, chars) for k, v in data.items()}
        out["truncated"] = True
        if len(json.dumps(out)) <= max_bytes:
            return out
    scalars = {str(k): _shrink(v, 1, 30) for k, v in data.items()
               if v is None or isinstance(v, (bool, int, float, str))}
    scalars["truncated"] = True
    return scalars if len(json.dumps(scalars)) <= max_bytes else {"truncated": True}


class InspectDataset(M3Tool):
    name: str = "inspect_dataset"
    description: str = ("Scan the planned dataset folder (read-only): layout, classes and counts, "
                        "file format, dimension, patient grouping, existing split, examples.")
    args_schema: type[BaseModel] = NoArgs

    def execute(self) -> dict:
        try:
            return {"scan": bounded(_planned_scan(self.ctx).summary())}
        except ScanError as exc:
            raise ToolError(str(exc)) from exc

    def summarise(self, result: dict) -> str:
        s = result["scan"]
        return (f"{s['layout']}, {s['dimension']} {s['file_format']}, {s['num_samples']} images, "
                f"{s['num_groups']} patients, classes {s['class_counts']}")


class IndexArgs(BaseModel):
    test_fraction: float | None = Field(default=None, gt=0.0, lt=0.9,
                                        description="share of patients held out for testing; "
                                        "default: the plan's (0.2)")
    seed: int | None = Field(default=None, description="random seed of the split; default: the "
                             "plan's (42)")
    keep_existing_split: bool = Field(default=True,
                                      description="keep a train/test split the dataset has")


class BuildIndex(M3Tool):
    name: str = "build_index"
    description: str = ("Write the index in the paper's format for the planned task "
                        "(Datapath/train.json, test.json, label_dict.json when the task has "
                        "labels) and split.json, split by patient and stratified by class, "
                        "within the sample caps the datacard states; then run the index gate "
                        "and return its verdict.")
    args_schema: type[BaseModel] = IndexArgs

    def execute(self, test_fraction: float | None = None, seed: int | None = None,
                keep_existing_split: bool = True) -> dict:
        plan = self.ctx.plan()
        template, split = plan.get("template", ""), plan.get("split") or {}
        fixed = user_edits(plan)  # what the user set when approving the plan is binding
        if "test_fraction" in fixed:  # the user chose the share: re-split to it
            test_fraction, keep_existing_split = fixed["test_fraction"], False
        seed = fixed.get("seed", seed)
        test_fraction = split.get("test_fraction", 0.2) if test_fraction is None else test_fraction
        seed = split.get("seed", 42) if seed is None else seed
        try:
            description = _planned_description(self.ctx)
            scan = scan_folder(_planned_dataset(self.ctx), description)
            summary = write_index(scan, self.ctx.workspace.datapath, template, test_fraction,
                                  seed, keep_existing_split, caps=description)
        except (ScanError, IndexBuildError) as exc:
            raise ToolError(str(exc)) from exc
        gate = index_gate(self.ctx)
        if not gate.ok:
            raise ToolError(gate.message())
        return {"index": bounded(summary, MAX_PREVIEW_BYTES - 1024), "gate": gate.message()}

    def summarise(self, result: dict) -> str:
        i = result["index"]
        return (f"train {i['num_train']} / test {i['num_test']} images "
                f"({i['num_train_groups']}/{i['num_test_groups']} patients); {result['gate']}")


def data_engineer_tools(ctx) -> list[M3Tool]:
    role = "Data Engineer"
    return [InspectDataset(ctx=ctx, role=role), BuildIndex(ctx=ctx, role=role)]
