"""Data Engineer tools: look at the planned dataset (read-only), write the index files."""
from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from core.catalog import find_entry
from core.indexing import IndexBuildError
from core.scan import ScanError, ScanResult, scan_folder
from core.tasks import check_index, write_index
from tools.base import M3Tool, NoArgs
from tools.context import ToolError


def _planned_dataset(ctx) -> Path:
    plan = ctx.plan()
    if plan.get("status") != "ready":
        raise ToolError("the plan has no dataset; nothing to index")
    return Path(plan["dataset_path"])


def _planned_scan(ctx) -> ScanResult:
    """Scan the planned dataset, helped by its datacard's description (columns, codes, caps)."""
    folder = _planned_dataset(ctx)
    entry = find_entry(ctx.settings, ctx.plan()["dataset"])
    return scan_folder(folder, entry.card.description if entry else "")


class InspectDataset(M3Tool):
    name: str = "inspect_dataset"
    description: str = ("Scan the planned dataset folder (read-only): layout, classes and counts, "
                        "file format, dimension, patient grouping, existing split, examples.")
    args_schema: type[BaseModel] = NoArgs

    def execute(self) -> dict:
        try:
            return {"scan": _planned_scan(self.ctx).summary()}
        except ScanError as exc:
            raise ToolError(str(exc)) from exc

    def summarise(self, result: dict) -> str:
        s = result["scan"]
        return (f"{s['layout']}, {s['dimension']} {s['file_format']}, {s['num_samples']} images, "
                f"{s['num_groups']} patients, classes {s['class_counts']}")


class IndexArgs(BaseModel):
    test_fraction: float = Field(default=0.2, gt=0.0, lt=0.9,
                                 description="share of patients held out for testing")
    seed: int = Field(default=42, description="random seed of the split")
    keep_existing_split: bool = Field(default=True,
                                      description="keep a train/test split the dataset has")


class BuildIndex(M3Tool):
    name: str = "build_index"
    description: str = ("Write the index in the paper's format for the planned task "
                        "(Datapath/train.json, test.json, label_dict.json when the task has "
                        "labels) and split.json, split by patient and stratified by class; then "
                        "run the index gate and return its verdict.")
    args_schema: type[BaseModel] = IndexArgs

    def execute(self, test_fraction: float = 0.2, seed: int = 42,
                keep_existing_split: bool = True) -> dict:
        template = self.ctx.plan().get("template", "")
        try:
            scan = _planned_scan(self.ctx)
            summary = write_index(scan, self.ctx.workspace.datapath, template, test_fraction,
                                  seed, keep_existing_split)
        except (ScanError, IndexBuildError) as exc:
            raise ToolError(str(exc)) from exc
        gate = check_index(self.ctx.workspace, template)
        if not gate.ok:
            raise ToolError(gate.message())
        return {"index": summary, "gate": gate.message()}

    def summarise(self, result: dict) -> str:
        i = result["index"]
        return (f"train {i['num_train']} / test {i['num_test']} images "
                f"({i['num_train_groups']}/{i['num_test_groups']} patients); {result['gate']}")


def data_engineer_tools(ctx) -> list[M3Tool]:
    role = "Data Engineer"
    return [InspectDataset(ctx=ctx, role=role), BuildIndex(ctx=ctx, role=role)]
