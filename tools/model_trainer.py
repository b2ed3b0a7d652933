"""Model Trainer tools: configure training from the template, run it as its own process (metrics
stream to the store), and score the test set with the system's evaluator."""
from __future__ import annotations

import json
import socket
import time
from pathlib import Path

from pydantic import BaseModel, Field

from core.datacards import write_json_atomic
from core.evaluation import EvaluationError
from core.gates import check_report, check_training
from core.manifest import build_manifest
from core.model_card import render_model_card
from core.plan_edits import user_edits
from core.provenance import file_digest, predictions_digest
from core.tasks import DEFAULT_TRAINING, NNUNET_NETWORKS, evaluate, template_networks
from tools.base import M3Tool, NoArgs
from tools.context import ToolError
from tools.process import run_module, tail
from tools.scripts import confinement_for


DDP_TEMPLATES = {"diagnosis"}  # multi-process (torchrun) training tested with gloo on CPU


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def training_module(config: dict) -> str:
    """The program that trains this config: the template's MONAI/Transformers trainer, or the
    nnU-Net v2 engine for segmentation plans that chose it."""
    if config.get("engine") == "nnunet":
        return "ml_templates.segmentation.nnunet_train"
    return f"ml_templates.{config['template']}.train"


class ConfigArgs(BaseModel):
    network: str | None = Field(default=None, description="a network of the task's template "
                                "(e.g. densenet_small, unet_small, retinanet_small, "
                                "report_small); default: the plan's model. A network, epochs or "
                                "seed the user set in the plan always wins")
    epochs: int | None = Field(default=None, ge=1, le=1000,
                               description="default: the template's (diagnosis 40, ...)")
    batch_size: int | None = Field(default=None, ge=1, le=1024,
                                   description="samples per step; default: the template's")
    learning_rate: float | None = Field(default=None, gt=0, le=1.0,
                                        description="optimizer step size; default: the "
                                        "template's (1e-3 for most)")
    early_stopping_patience: int | None = Field(
        default=None, ge=0, le=1000, description="epochs without validation gain; 0 = off")
    pretrained_path: str | None = Field(default=None, description="local weights file, optional")
    iterations_per_epoch: int | None = Field(
        default=None, ge=1, le=100000,
        description="nnU-Net engine only: training iterations per epoch (default 250 on a GPU, "
                    "10 on CPU)")
    num_processes: int | None = Field(default=None, ge=1, le=64,
                                      description="data-parallel processes (default: one per "
                                      "GPU when there are several, else 1)")
    seed: int = Field(default=42, description="random seed of training (reproducible runs)")


class ConfigureTraining(M3Tool):
    name: str = "configure_training"
    description: str = ("Write train_config.json for the task's training template: network, "
                        "epochs, batch size, learning rate, early stopping, seed, time budget "
                        "from the plan, optional local pretrained weights.")
    args_schema: type[BaseModel] = ConfigArgs

    def execute(self, network: str | None = None, epochs: int | None = None,
                batch_size: int | None = None, learning_rate: float | None = None,
                early_stopping_patience: int | None = None, pretrained_path: str | None = None,
                seed: int = 42, num_processes: int | None = None,
                iterations_per_epoch: int | None = None) -> dict:
        plan = self.ctx.plan()
        fixed = user_edits(plan)  # what the user set when approving the plan is binding
        network = fixed.get("model") or network or plan["model"]
        epochs = fixed.get("epochs") or epochs
        seed = fixed.get("seed", seed)
        engine = plan.get("engine", "")
        if network in NNUNET_NETWORKS:
            engine = "nnunet"
        elif engine == "nnunet" and network in template_networks(plan["template"]):
            engine = "monai"  # a MONAI network asked for by name overrides the plan's engine
        defaults = DEFAULT_TRAINING[plan["template"]]
        if engine == "nnunet":  # nnU-Net's own schedule on a GPU; the budget stops it on CPU
            defaults = {**defaults, "epochs": 1000 if plan.get("device") == "cuda" else 20}
        epochs = epochs or defaults["epochs"]
        batch_size = batch_size or defaults["batch_size"]
        learning_rate = learning_rate or defaults["learning_rate"]
        if early_stopping_patience is None:
            early_stopping_patience = defaults["early_stopping_patience"]
        import torch
        gpus = torch.cuda.device_count()
        ddp_ok = plan["template"] in DDP_TEMPLATES and engine != "nnunet"
        num_processes = num_processes or (gpus if gpus > 1 and ddp_ok else 1)
        if num_processes > 1 and not ddp_ok:
            raise ToolError(f"multi-process training is verified for {sorted(DDP_TEMPLATES)} "
                            f"(MONAI engine) only; use num_processes=1 for "
                            f"{engine or plan['template']}")
        ws = self.ctx.workspace
        if not ws.dataloader.exists():
            raise ToolError("Datapath/dataloader.py is missing: the Module Architect writes it first")
        if network not in template_networks(plan["template"], engine):
            choices = template_networks(plan["template"]) + (
                sorted(NNUNET_NETWORKS) if plan["template"] == "segmentation" else [])
            raise ToolError(f"unknown network {network!r}; choose one of {choices}")
        if pretrained_path and not Path(pretrained_path).is_file():
            raise ToolError(f"pretrained weights {pretrained_path} do not exist")
        check_path = ws.datapath / "dataloader_check.json"
        if not check_path.exists():
            raise ToolError("the dataloader has not been validated: the Module Architect runs "
                            "validate_dataloader first")
        loader = json.loads((ws.datapath / "dataloader_config.json").read_text())
        shapes = json.loads(check_path.read_text()).get("shapes") or [[1]]
        config = {
            "job_id": self.ctx.job_id, "store_path": str(self.ctx.settings.store_path),
            "datapath": str(ws.datapath), "dataloader": str(ws.dataloader),
            "output_dir": str(ws.logout), "task": plan["task"], "template": plan["template"],
            "network": network, "image_size": loader.get("IMAGE_SIZE", shapes[0][1:]),
            "roi_size": loader.get("ROI_SIZE"), "in_channels": loader.get("IN_CHANNELS", 1),
            "epochs": epochs,
            "batch_size": batch_size, "learning_rate": learning_rate,
            "early_stopping_patience": early_stopping_patience, "seed": seed,
            "time_budget_s": plan.get("time_budget_s", 600), "device": plan.get("device", "auto"),
            "pretrained_path": pretrained_path, "val_fraction": 0.15,
            "num_processes": num_processes}
        if engine:
            config["engine"] = engine
        if engine == "nnunet":  # nnU-Net plans patch, batch, lr and spacing itself
            config.update(configuration=NNUNET_NETWORKS[network],
                          iterations_per_epoch=iterations_per_epoch, workers=2)
        write_json_atomic(ws.train_config, config)
        return {"config": config, "path": str(ws.train_config)}

    def summarise(self, result: dict) -> str:
        c = result["config"]
        engine = f"{c['engine']} " if c.get("engine") else ""
        return (f"{engine}{c['network']}, {c['epochs']} epochs, bs {c['batch_size']}, lr "
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
        module, args = training_module(config), ["--config", str(ws.train_config)]
        if int(config.get("num_processes") or 1) > 1:  # DDP: torchrun starts one per process
            module, args = "torch.distributed.run", [
                "--nproc_per_node", str(config["num_processes"]), "--master_port",
                str(free_port()), "-m", module, *args]
        # in LLM mode the dataloader may be the LLM's code: train confined (tools/scripts.py);
        # data-parallel processes talk over loopback TCP, so those keep TCP
        confine = confinement_for(self.ctx, extra_read=(config.get("pretrained_path"),),
                                  allow_tcp=int(config.get("num_processes") or 1) > 1)
        run = run_module(module, args,
                         ws.logout / "train.log", timeout_s=float(config["time_budget_s"]) + 300,
                         should_stop=lambda: bool((store.job(job_id) or {}).get("stop_requested")),
                         confine=confine, scratch=ws.root / ".tmp")
        if run["returncode"] != 0:
            raise ToolError(f"training {run['ended']} with exit code {run['returncode']}:\n"
                            f"{run['log_tail']}")
        gate = check_training(ws, len(store.metrics(job_id)))
        if not gate.ok:
            raise ToolError(gate.message())
        summary = gate.facts
        # what the evaluator may score: exactly what the template just wrote
        self.ctx.event(self.role, "provenance", tool="predictions",
                       result=predictions_digest(ws.logout))
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
    description: str = ("Score the test-set predictions with the system's evaluator for the "
                        "task (diagnosis AUC/accuracy/F1, segmentation Dice/HD95, detection "
                        "mAP50, reports BLEU/ROUGE-L vs a baseline; 95% bootstrap CIs); write "
                        "report.json and the model card; record the model.")
    args_schema: type[BaseModel] = NoArgs

    def execute(self) -> dict:
        ws = self.ctx.workspace
        plan = ws.read_plan()
        recorded = [e["result"] for e in self.ctx.store.events(self.ctx.job_id)
                    if e["kind"] == "provenance" and e["tool"] == "predictions"]
        if not recorded:
            raise ToolError("no finished training run in this job: call run_training first "
                            "(only the template's own predictions are scored)")
        if predictions_digest(ws.logout) != recorded[-1]:
            raise ToolError("Logout/predictions changed after training finished; only the "
                            "template's own predictions are scored: call run_training again")
        try:
            report = evaluate(plan["template"], ws.datapath, ws.logout / "predictions.json")
        except (EvaluationError, OSError, ValueError) as exc:
            raise ToolError(str(exc)) from exc
        summary = json.loads((ws.logout / "train_summary.json").read_text())
        split = json.loads((ws.datapath / "split.json").read_text())
        report.update(job_id=self.ctx.job_id, dataset=plan["dataset"], request=plan["request"],
                      training=summary)
        write_json_atomic(ws.report, report)
        self.ctx.event(self.role, "provenance", tool="report", result=file_digest(ws.report))
        gate = check_report(ws)
        if not gate.ok:
            raise ToolError(gate.message())
        split.pop("groups", None)
        ws.model_card.write_text(render_model_card(plan, report, summary, split))
        write_json_atomic(ws.logout / "manifest.json", build_manifest(ws.datapath,
                                                                      ws.train_config))
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
        return ", ".join(f"{k} {v:.3f}" for k, v in result["metrics"].items()
                         if isinstance(v, (int, float)))


class TrainingStatus(M3Tool):
    name: str = "training_status"
    description: str = ("Read this job's training so far: the latest value of every streamed "
                        "metric, how many were logged, the training summary when it finished, "
                        "and the last lines of the training log.")
    args_schema: type[BaseModel] = NoArgs

    def execute(self) -> dict:
        ws = self.ctx.workspace
        rows = self.ctx.store.metrics(self.ctx.job_id)
        latest: dict = {}
        for row in rows:
            latest[row["name"]] = {"value": round(row["value"], 5), "step": row["step"],
                                   "epoch": row["epoch"]}
        summary_path = ws.logout / "train_summary.json"
        summary = json.loads(summary_path.read_text()) if summary_path.exists() else None
        return {"metric_rows": len(rows), "latest": latest,
                "finished": summary is not None,
                "summary": {k: summary.get(k) for k in ("network", "epochs_run", "stop_reason",
                                                        "best_val_metric", "seconds")}
                if summary else None,
                "log_tail": tail(ws.logout / "train.log", 15)[-3000:]}

    def summarise(self, result: dict) -> str:
        return (f"{result['metric_rows']} metric rows, finished {result['finished']}, latest "
                + ", ".join(f"{k} {v['value']}" for k, v in list(result["latest"].items())[:4]))


def model_trainer_tools(ctx) -> list[M3Tool]:
    role = "Model Trainer"
    return [ConfigureTraining(ctx=ctx, role=role), RunTraining(ctx=ctx, role=role),
            TrainingStatus(ctx=ctx, role=role), EvaluateModel(ctx=ctx, role=role)]
