"""Model Trainer tools: configure training from the template, run it as its own process (metrics
stream to the store), and score the test set with the system's evaluator."""
from __future__ import annotations

import json
import time
from pathlib import Path

from pydantic import BaseModel, Field

from core.datacards import write_json_atomic
from core.evaluation import EvaluationError, evaluate_diagnosis
from core.gates import check_report, check_training
from core.model_card import render_model_card
from ml_templates.diagnosis.model import NETWORKS
from tools.base import M3Tool, NoArgs
from tools.context import ToolError
from tools.process import run_module


class ConfigArgs(BaseModel):
    network: str | None = Field(default=None, description=f"one of {sorted(NETWORKS)}; "
                                "default: the plan's model")
    epochs: int = Field(default=40, ge=1, le=1000)
    batch_size: int = Field(default=16, ge=1, le=1024)
    learning_rate: float = Field(default=1e-3, gt=0, le=1.0)
    early_stopping_patience: int = Field(default=10, ge=0, le=1000,
                                         description="epochs without validation gain; 0 = off")
    pretrained_path: str | None = Field(default=None, description="local weights file, optional")
    seed: int = 42


class ConfigureTraining(M3Tool):
    name: str = "configure_training"
    description: str = ("Write train_config.json for the task's training template: network, "
                        "epochs, batch size, learning rate, early stopping, seed, time budget "
                        "from the plan, optional local pretrained weights.")
    args_schema: type[BaseModel] = ConfigArgs

    def execute(self, network: str | None = None, epochs: int = 40, batch_size: int = 16,
                learning_rate: float = 1e-3, early_stopping_patience: int = 10,
                pretrained_path: str | None = None, seed: int = 42) -> dict:
        plan = self.ctx.plan()
        ws = self.ctx.workspace
        if not ws.dataloader.exists():
            raise ToolError("Datapath/dataloader.py is missing: the Module Architect writes it first")
        network = network or plan["model"]
        if network not in NETWORKS:
            raise ToolError(f"unknown network {network!r}; choose one of {sorted(NETWORKS)}")
        if pretrained_path and not Path(pretrained_path).is_file():
            raise ToolError(f"pretrained weights {pretrained_path} do not exist")
        check_path = ws.datapath / "dataloader_check.json"
        if not check_path.exists():
            raise ToolError("the dataloader has not been validated: the Module Architect runs "
                            "validate_dataloader first")
        shape = json.loads(check_path.read_text())["shapes"][0]
        config = {
            "job_id": self.ctx.job_id, "store_path": str(self.ctx.settings.store_path),
            "datapath": str(ws.datapath), "dataloader": str(ws.dataloader),
            "output_dir": str(ws.logout), "task": plan["task"], "network": network,
            "image_size": shape[1:], "in_channels": shape[0], "epochs": epochs,
            "batch_size": batch_size, "learning_rate": learning_rate,
            "early_stopping_patience": early_stopping_patience, "seed": seed,
            "time_budget_s": plan.get("time_budget_s", 600), "device": plan.get("device", "auto"),
            "pretrained_path": pretrained_path, "val_fraction": 0.15}
        write_json_atomic(ws.train_config, config)
        return {"config": config, "path": str(ws.train_config)}

    def summarise(self, result: dict) -> str:
        c = result["config"]
        return (f"{c['network']}, {c['epochs']} epochs, bs {c['batch_size']}, lr "
                f"{c['learning_rate']}, budget {c['time_budget_s']} s")


class RunTraining(M3Tool):
    name: str = "run_training"
    description: str = ("Run the training template with train_config.json as a separate process "
                        "(metrics stream to the dashboard); returns how it ended, the training "
                        "summary, and the log's tail when it failed.")
    args_schema: type[BaseModel] = NoArgs

    def execute(self) -> dict:
        ws = self.ctx.workspace
        if not ws.train_config.exists():
            raise ToolError("train_config.json is missing: call configure_training first")
        config = json.loads(ws.train_config.read_text())
        store, job_id = self.ctx.store, self.ctx.job_id
        run = run_module(f"ml_templates.{config['task']}.train", ["--config", str(ws.train_config)],
                         ws.logout / "train.log", timeout_s=float(config["time_budget_s"]) + 300,
                         should_stop=lambda: bool((store.job(job_id) or {}).get("stop_requested")))
        if run["returncode"] != 0:
            raise ToolError(f"training {run['ended']} with exit code {run['returncode']}:\n"
                            f"{run['log_tail']}")
        gate = check_training(ws, len(store.metrics(job_id)))
        if not gate.ok:
            raise ToolError(gate.message())
        summary = gate.facts
        return {"summary": {k: summary.get(k) for k in ("network", "epochs_run", "best_val_metric",
                                                        "stop_reason", "seconds", "device")},
                "gate": gate.message()}

    def summarise(self, result: dict) -> str:
        s = result["summary"]
        best = s["best_val_metric"]
        best = f"{best:.3f}" if isinstance(best, (int, float)) else "n/a"
        return (f"{s['epochs_run']:.0f} epochs in {s['seconds']:.0f} s, best val {best}, "
                f"{s['stop_reason']}")


class EvaluateModel(M3Tool):
    name: str = "evaluate_model"
    description: str = ("Score the test-set predictions with the system's evaluator (AUC, "
                        "accuracy, F1, per-class sensitivity/specificity, confusion matrix, 95% "
                        "bootstrap CIs); write report.json and the model card; record the model.")
    args_schema: type[BaseModel] = NoArgs

    def execute(self) -> dict:
        ws = self.ctx.workspace
        try:
            report = evaluate_diagnosis(ws.datapath, ws.logout / "predictions.json")
        except (EvaluationError, OSError) as exc:
            raise ToolError(str(exc)) from exc
        plan = ws.read_plan()
        summary = json.loads((ws.logout / "train_summary.json").read_text())
        split = json.loads((ws.datapath / "split.json").read_text())
        report.update(job_id=self.ctx.job_id, dataset=plan["dataset"], request=plan["request"],
                      training=summary)
        write_json_atomic(ws.report, report)
        gate = check_report(ws)
        if not gate.ok:
            raise ToolError(gate.message())
        split.pop("groups", None)
        ws.model_card.write_text(render_model_card(plan, report, summary, split))
        self.ctx.store.add_model({
            "id": self.ctx.job_id, "job_id": self.ctx.job_id,
            "name": f"{plan['dataset']} {plan['task']} ({summary['network']})",
            "task": plan["task"], "dataset": plan["dataset"], "path": str(ws.logout / "model"),
            "metrics": json.dumps(report["metrics"]), "card_path": str(ws.model_card),
            "created_at": time.time()})
        return {"metrics": report["metrics"], "ci95": report["ci95"],
                "num_test": report["num_test"], "report": str(ws.report),
                "model_card": str(ws.model_card)}

    def summarise(self, result: dict) -> str:
        return ", ".join(f"{k} {v:.3f}" for k, v in result["metrics"].items())


def model_trainer_tools(ctx) -> list[M3Tool]:
    role = "Model Trainer"
    return [ConfigureTraining(ctx=ctx, role=role), RunTraining(ctx=ctx, role=role),
            EvaluateModel(ctx=ctx, role=role)]
