"""Data Engineer tools: look at the planned dataset (read-only), write the index files
(core.datasets.index_stage); results an agent reads are bounded in size."""
from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field

from core.datasets.index_stage import NoPlannedDataset, build_index, scan_planned
from core.datasets.layouts.types import ScanError
from core.datasets.splitting import IndexBuildError
from tools.base import M3Tool, NoArgs
from tools.context import ToolError
from tools.gates import index_gate


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
            return {"scan": bounded(scan_planned(self.ctx.settings, self.ctx.plan()).summary())}
        except (ScanError, NoPlannedDataset) as exc:
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
        try:
            summary = build_index(self.ctx.settings, self.ctx.plan(), self.ctx.workspace.datapath,
                                  test_fraction, seed, keep_existing_split)
        except (ScanError, IndexBuildError, NoPlannedDataset) as exc:
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
