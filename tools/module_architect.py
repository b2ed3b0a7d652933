"""Module Architect tools: instantiate the task's dataloader template next to the index files,
then validate it by loading every sample in a separate process."""
from __future__ import annotations

import json

from pydantic import BaseModel, Field

from core.evaluation.diagnosis import is_multi_label
from core.fingerprint import fingerprint, intensity_for, training_image_size
from core.gates import check_dataloader
from core.settings import TEMPLATES_DIR
from ml_templates.common.instantiate import instantiate
from tools.base import M3Tool, NoArgs
from tools.context import ToolError
from tools.process import run_module

TEMPLATES = {"diagnosis": TEMPLATES_DIR / "diagnosis" / "dataloader_template.py"}


class DataloaderArgs(BaseModel):
    image_size: list[int] | None = Field(default=None, description="spatial size after resizing, "
                                         "e.g. [128, 128]; default from the data's fingerprint")
    in_channels: int | None = Field(default=None, ge=1, le=16,
                                    description="input channels; default from the fingerprint")


class WriteDataloader(M3Tool):
    name: str = "write_dataloader"
    description: str = ("Write Datapath/dataloader.py from the task's dataloader template, sized "
                        "from the dataset fingerprint (median image size, channels).")
    args_schema: type[BaseModel] = DataloaderArgs

    def execute(self, image_size: list[int] | None = None, in_channels: int | None = None) -> dict:
        plan = self.ctx.plan()
        ws = self.ctx.workspace
        template = TEMPLATES.get(plan.get("task"))
        if template is None:
            raise ToolError(f"no dataloader template for task {plan.get('task')!r}")
        train_path = ws.datapath / "train.json"
        if not train_path.exists():
            raise ToolError("Datapath/train.json is missing: the Data Engineer builds the index first")
        fp = fingerprint(list(json.loads(train_path.read_text())))
        size = image_size or training_image_size(fp, plan.get("device", "cpu"))
        if any(not 8 <= s <= 1024 for s in size) or len(size) not in (2, 3):
            raise ToolError(f"image_size must have 2 or 3 sides between 8 and 1024, got {size}")
        index = {**json.loads(train_path.read_text()),
                 **json.loads((ws.datapath / "test.json").read_text())}
        values = {"DATAPATH": str(ws.datapath), "IMAGE_SIZE": list(size),
                  "IN_CHANNELS": int(in_channels or fp.get("channels", 1)),
                  "MULTI_LABEL": is_multi_label(index),
                  "INTENSITY": intensity_for(plan.get("modality", ""), plan.get("anatomy", ""),
                                             plan.get("file_format", ""))}
        instantiate(template, ws.dataloader, values)
        (ws.datapath / "fingerprint.json").write_text(json.dumps(fp, indent=2))
        return {"dataloader": str(ws.dataloader), "config": values, "fingerprint": fp}

    def summarise(self, result: dict) -> str:
        c = result["config"]
        return f"dataloader.py, size {c['IMAGE_SIZE']}, {c['IN_CHANNELS']} channel(s)"


class ValidateDataloader(M3Tool):
    name: str = "validate_dataloader"
    description: str = ("Load every train and test sample through Datapath/dataloader.py in a "
                        "separate process; report failures (with errors), shapes and label counts, "
                        "and the dataloader gate's verdict.")
    args_schema: type[BaseModel] = NoArgs

    def execute(self) -> dict:
        ws = self.ctx.workspace
        if not ws.dataloader.exists():
            raise ToolError("Datapath/dataloader.py is missing: call write_dataloader first")
        run = run_module("ml_templates.diagnosis.check_dataloader",
                         ["--datapath", str(ws.datapath)], ws.logout / "dataloader_check.log",
                         timeout_s=900)
        gate = check_dataloader(ws)
        if not gate.ok:
            raise ToolError(gate.message() + ("\n" + run["log_tail"] if run["returncode"] else ""))
        facts = gate.facts
        return {"loaded": facts.get("loaded"), "shapes": facts.get("shapes"),
                "label_counts": facts.get("label_counts"), "intensity": facts.get("intensity"),
                "seconds": run["seconds"], "gate": gate.message()}

    def summarise(self, result: dict) -> str:
        return f"loaded {result['loaded']}, shapes {result['shapes']}; {result['gate']}"


def module_architect_tools(ctx) -> list[M3Tool]:
    role = "Module Architect"
    return [WriteDataloader(ctx=ctx, role=role), ValidateDataloader(ctx=ctx, role=role)]
