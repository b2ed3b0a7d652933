"""Module Architect tools: write the job's dataloader from its template (core.training.dataloader),
then validate it by loading samples in the template's checker, a separate (in LLM mode,
confined) process: every image of a small split, a stratified sample (every class) of a large
one; what it decodes is cached for training."""
from __future__ import annotations

from pydantic import BaseModel, Field

from core.training.dataloader import DataloaderError, write_dataloader
from runtime.process import run_module
from tools.base import M3Tool, NoArgs
from tools.context import ToolError
from tools.confinement import confinement_for
from tools.gates import dataloader_gate


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
        try:
            return write_dataloader(self.ctx.settings, self.ctx.workspace, image_size,
                                    in_channels)
        except DataloaderError as exc:
            raise ToolError(str(exc)) from exc

    def summarise(self, result: dict) -> str:
        c = result["config"]
        size = c.get("IMAGE_SIZE") or c.get("ROI_SIZE")
        return f"dataloader.py, size {size}, {c.get('IN_CHANNELS')} channel(s)"


class ValidateDataloader(M3Tool):
    name: str = "validate_dataloader"
    description: str = ("Load train and test samples through Datapath/dataloader.py in a "
                        "separate process (every image of a small split, a stratified sample "
                        "with every class of a large one); report failures (with errors), shapes "
                        "and label counts, and the dataloader gate's verdict.")
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
        return {"loaded": facts.get("loaded"), "checked": facts.get("checked"),
                "expected": facts.get("expected"), "sampled": bool(facts.get("sampled")),
                "shapes": facts.get("shapes", [])[:5], "seconds": run["seconds"],
                "gate": gate.message()}

    def summarise(self, result: dict) -> str:
        loaded = result["loaded"]
        if result.get("sampled") and isinstance(loaded, dict):
            loaded = (f"{sum(loaded.values())} (a stratified sample of "
                      f"{sum((result.get('expected') or {}).values())} images)")
        return f"loaded {loaded}, shapes {result['shapes'][:2]}; {result['gate']}"


def module_architect_tools(ctx) -> list[M3Tool]:
    role = "Module Architect"
    return [WriteDataloader(ctx=ctx, role=role), ValidateDataloader(ctx=ctx, role=role)]
