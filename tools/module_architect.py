"""Module Architect tools: instantiate the task's dataloader template next to the index files,
sized from the dataset fingerprint, then validate it by loading every sample in a separate
process."""
from __future__ import annotations

import json

from pydantic import BaseModel, Field

from core.datasets.catalog import find_entry
from core.datasets.datacards import write_json_atomic
from core.evaluation.diagnosis import is_multi_label
from core.datasets.fingerprint import fingerprint, intensity_for, training_image_size
from core.config.settings import TEMPLATES_DIR
from ml_templates.common.instantiate import instantiate
from tools.base import M3Tool, NoArgs
from tools.context import ToolError
from tools.gates import dataloader_gate
from runtime.process import run_module
from tools.confinement import confinement_for


def _images(index) -> list:
    return list(index) if isinstance(index, dict) else [e["image_path"] for e in index]


def _roi(shape: list[int], spacing: list[float] | None, pixdim: list[float] | None,
         device: str) -> list[int]:
    """Patch size: the resampled median size, capped (CPU 64x64x32 / 128x128; GPU 128^3 /
    256^2), rounded down to a multiple of 16 (UNet levels), at least 16."""
    if spacing and pixdim:  # header order (x, y, z) matches the NIfTI spacing order
        shape = [int(s * sp / p) for s, sp, p in zip(shape, spacing, pixdim)]
    caps = ([128, 128, 128] if device == "cuda" else [64, 64, 32]) if len(shape) == 3 else \
        ([256, 256] if device == "cuda" else [128, 128])
    return [max(16, min(c, s) // 16 * 16) for s, c in zip(shape, caps)]


def dataloader_config(template: str, plan: dict, fp: dict, train: list | dict, test: list | dict,
                      image_size: list[int] | None, in_channels: int | None) -> dict:
    device = plan.get("device", "cpu")
    dims = fp.get("spatial_dims", 2)
    channels = int(in_channels or fp.get("channels", 1))
    intensity = intensity_for(plan.get("modality", ""), plan.get("anatomy", ""),
                              plan.get("file_format", ""))
    size = list(image_size or training_image_size(fp, device))
    if template == "diagnosis":
        return {"IMAGE_SIZE": size, "IN_CHANNELS": channels,
                "MULTI_LABEL": is_multi_label({**train, **test}), "INTENSITY": intensity}
    if template == "segmentation":
        spacing = fp.get("median_spacing")
        pixdim = [round(max(s, min(spacing)), 2) for s in spacing] if spacing and dims == 3 \
            else None
        first = train[0]
        return {"SPATIAL_DIMS": dims, "PIXDIM": pixdim,
                "ROI_SIZE": list(image_size or _roi(fp["median_shape"], spacing, pixdim, device)),
                "IN_CHANNELS": len(first["image_path"]) if isinstance(first["image_path"], list)
                else channels, "NUM_CLASSES": len(first["labels"]) + 1, "INTENSITY": intensity}
    if template == "detection":
        return {"SPATIAL_DIMS": dims, "IMAGE_SIZE": size, "IN_CHANNELS": channels,
                "INTENSITY": intensity}
    words = [len((e["findings"] + " " + e["impression"]).split()) for e in train]
    max_tokens = min(256, max(32, int(sorted(words)[int(0.95 * (len(words) - 1))] * 1.5) + 8))
    return {"SPATIAL_DIMS": dims, "IMAGE_SIZE": size, "IN_CHANNELS": channels,
            "MAX_TOKENS": max_tokens, "TOKENIZER_PATH": "", "INTENSITY": intensity}


class DataloaderArgs(BaseModel):
    image_size: list[int] | None = Field(default=None, description="spatial size after resizing "
                                         "(segmentation: the training patch size), e.g. [128, "
                                         "128]; default from the data's fingerprint")
    in_channels: int | None = Field(default=None, ge=1, le=16,
                                    description="input channels; default from the fingerprint")


class WriteDataloader(M3Tool):
    name: str = "write_dataloader"
    description: str = ("Write Datapath/dataloader.py from the task's dataloader template, sized "
                        "from the dataset fingerprint (median size, spacing, channels).")
    args_schema: type[BaseModel] = DataloaderArgs

    def execute(self, image_size: list[int] | None = None, in_channels: int | None = None) -> dict:
        plan = self.ctx.plan()
        ws = self.ctx.workspace
        template = plan.get("template", "")
        source = TEMPLATES_DIR / template / "dataloader_template.py"
        if not source.exists():
            raise ToolError(f"no dataloader template for {template!r}")
        if not (ws.train_index).exists():
            raise ToolError("Datapath/train.json is missing: "
                            "the Data Engineer builds the index first")
        train = json.loads((ws.train_index).read_text())
        test = json.loads((ws.test_index).read_text())
        if image_size and (len(image_size) not in (2, 3) or
                           any(not 8 <= s <= 1024 for s in image_size)):
            raise ToolError("image_size must have 2 or 3 sides between 8 and 1024, "
                            f"got {image_size}")
        entry = find_entry(self.ctx.settings, plan.get("dataset") or "")
        # pickled volumes are read only when the datacard allows it (unpickling runs code)
        allow_pickle = bool(entry and entry.card.allow_pickle)
        fp = fingerprint(_images(train), allow_pickle=allow_pickle)
        values = {"DATAPATH": str(ws.datapath),
                  **dataloader_config(template, plan, fp, train, test, image_size, in_channels)}
        if allow_pickle or "ALLOW_PICKLE" in source.read_text():
            values["ALLOW_PICKLE"] = allow_pickle
        instantiate(source, ws.dataloader, values)
        write_json_atomic(ws.fingerprint, fp)
        write_json_atomic(ws.dataloader_config, values)
        return {"dataloader": str(ws.dataloader), "config": values, "fingerprint": fp}

    def summarise(self, result: dict) -> str:
        c = result["config"]
        size = c.get("IMAGE_SIZE") or c.get("ROI_SIZE")
        return f"dataloader.py, size {size}, {c.get('IN_CHANNELS')} channel(s)"


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
        template = self.ctx.plan().get("template", "")
        # in LLM mode the dataloader may be the LLM's code: run it confined (tools/confinement.py)
        run = run_module(f"ml_templates.{template}.check_dataloader",
                         ["--datapath", str(ws.datapath)], ws.dataloader_check_log,
                         timeout_s=900, confine=confinement_for(self.ctx),
                         scratch=ws.scratch)
        gate = dataloader_gate(self.ctx)
        if not gate.ok:
            raise ToolError(gate.message() + ("\n" + run["log_tail"] if run["returncode"] else ""))
        facts = gate.facts
        return {"loaded": facts.get("loaded"), "shapes": facts.get("shapes", [])[:5],
                "seconds": run["seconds"], "gate": gate.message()}

    def summarise(self, result: dict) -> str:
        return f"loaded {result['loaded']}, shapes {result['shapes'][:2]}; {result['gate']}"


def module_architect_tools(ctx) -> list[M3Tool]:
    role = "Module Architect"
    return [WriteDataloader(ctx=ctx, role=role), ValidateDataloader(ctx=ctx, role=role)]
