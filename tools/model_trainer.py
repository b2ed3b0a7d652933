"""Model Trainer tools: thin adapters over core.training (config, the run and its channel) and
core.evaluation.step (scoring); the tool records provenance and the model in the store."""
from __future__ import annotations

from functools import partial

from pydantic import BaseModel, Field

from core.evaluation import EvaluationError
from core.evaluation.step import evaluate_job, write_model_files
from core.jobs.provenance import file_digest, predictions_digest
from core.training.config import TrainConfigError, build_train_config, check_pretrained_path
from core.training.run import TrainingError, run_training, training_summary
from core.jobs.lifecycle import tail_file
from runtime.process import run_module
from tools.base import M3Tool, NoArgs
from tools.context import MAX_PLAN_BYTES, MAX_SUMMARY_BYTES, ToolError, read_json_bounded
from tools.gates import report_gate, training_gate
from tools.confinement import confinement_for


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
        try:
            config = build_train_config(
                self.ctx.workspace, self.ctx.job_id, network=network, epochs=epochs,
                batch_size=batch_size, learning_rate=learning_rate,
                early_stopping_patience=early_stopping_patience,
                pretrained_path=pretrained_path, seed=seed, num_processes=num_processes,
                iterations_per_epoch=iterations_per_epoch,
                weights_dir=self.ctx.settings.weights_dir)
        except TrainConfigError as exc:
            raise ToolError(str(exc)) from exc
        ws = self.ctx.workspace
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
        config = (read_json_bounded(ws.train_config, MAX_PLAN_BYTES)
                  if ws.train_config.exists() else {})
        config = config if isinstance(config, dict) else {}
        # in LLM mode the dataloader may be the LLM's code: train confined (tools/scripts.py);
        # data-parallel processes talk over loopback TCP, so those keep TCP
        try:  # the file may have been rewritten since configure_training checked it
            weights = check_pretrained_path(config.get("pretrained_path"),
                                            self.ctx.settings.weights_dir)
        except TrainConfigError as exc:
            raise ToolError(f"{exc}; run configure_training again") from exc
        confine = confinement_for(self.ctx, extra_read=(weights,),
                                  allow_tcp=int(config.get("num_processes") or 1) > 1)
        try:
            run_training(ws, self.ctx.store, self.ctx.job_id,
                         partial(run_module, confine=confine, scratch=ws.scratch))
        except TrainingError as exc:
            raise ToolError(str(exc)) from exc
        gate = training_gate(self.ctx)
        if not gate.ok:
            raise ToolError(gate.message())
        # what the evaluator may score: exactly what the template just wrote
        self.ctx.event(self.role, "provenance", tool="predictions",
                       result=predictions_digest(ws.logout))
        return {"summary": training_summary(gate), "gate": gate.message()}

    def summarise(self, result: dict) -> str:
        s = result["summary"]
        if s.get("selection"):  # "kept epoch 9: best validation loss (0.18)"
            kept = s["selection"]
        else:
            best = s["best_val_metric"]
            kept = f"best val {best:.3f}" if isinstance(best, (int, float)) else "best val n/a"
        return f"{s['epochs_run']:.0f} epochs in {s['seconds']:.0f} s, {kept}, {s['stop_reason']}"


class EvaluateModel(M3Tool):
    name: str = "evaluate_model"
    description: str = ("Score the test-set predictions with the system's evaluator for the "
                        "task (diagnosis AUC/accuracy/F1, segmentation Dice/HD95, detection "
                        "mAP50, reports BLEU/ROUGE-L vs a baseline; 95% bootstrap CIs); write "
                        "report.json and the model card; record the model.")
    args_schema: type[BaseModel] = NoArgs

    def execute(self) -> dict:
        ws = self.ctx.workspace
        recorded = [e["result"] for e in self.ctx.store.events(self.ctx.job_id)
                    if e["kind"] == "provenance" and e["tool"] == "predictions"]
        try:
            report = evaluate_job(ws, self.ctx.job_id, recorded[-1] if recorded else None)
        except (EvaluationError, OSError, ValueError) as exc:
            raise ToolError(str(exc)) from exc
        self.ctx.event(self.role, "provenance", tool="report", result=file_digest(ws.report))
        gate = report_gate(self.ctx)
        if not gate.ok:
            raise ToolError(gate.message())
        store, plan = self.ctx.store, ws.read_plan()
        name = store.next_model_name(self.ctx.job_id, plan["dataset"], plan["task"])
        recorded = store.add_model(write_model_files(ws, self.ctx.job_id, report, name))
        if recorded["name"] != name:  # another job of this dataset and task took the version
            write_model_files(ws, self.ctx.job_id, report, recorded["name"])
        return {"model": recorded["name"], "metrics": report["metrics"], "ci95": report["ci95"],
                "num_test": report["num_test"], "report": str(ws.report),
                "model_card": str(ws.model_card)}

    def summarise(self, result: dict) -> str:
        scores = ", ".join(f"{k} {v:.3f}" for k, v in result["metrics"].items()
                           if isinstance(v, (int, float)))
        return f"{result['model']}: {scores}" if result.get("model") else scores


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
        summary = (read_json_bounded(ws.train_summary, MAX_SUMMARY_BYTES)
                   if ws.train_summary.exists() else None)
        summary = summary if isinstance(summary, dict) else None
        return {"metric_rows": len(rows), "latest": latest,
                "finished": summary is not None,
                "summary": {k: summary.get(k) for k in ("network", "epochs_run", "stop_reason",
                                                        "best_val_metric", "seconds")}
                if summary else None,
                "log_tail": tail_file(ws.train_log, 15)[-3000:]}

    def summarise(self, result: dict) -> str:
        return (f"{result['metric_rows']} metric rows, finished {result['finished']}, latest "
                + ", ".join(f"{k} {v['value']}" for k, v in list(result["latest"].items())[:4]))


def model_trainer_tools(ctx) -> list[M3Tool]:
    role = "Model Trainer"
    return [ConfigureTraining(ctx=ctx, role=role), RunTraining(ctx=ctx, role=role),
            TrainingStatus(ctx=ctx, role=role), EvaluateModel(ctx=ctx, role=role)]
