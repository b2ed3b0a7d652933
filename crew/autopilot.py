"""Autopilot: each role's work done by deterministic code calling the role's own tools, in the
order the YAML task describes. No LLM; the same tools, the same logging, the same gates."""
from __future__ import annotations

from tools.context import JobContext


class StageError(RuntimeError):
    pass


def _tools(tools: list) -> dict:
    return {t.name: t for t in tools}


def _ok(result: dict, what: str) -> dict:
    if not result.get("ok"):
        raise StageError(f"{what}: {result.get('error')}")
    return result


def task_manager(tools: list, ctx: JobContext) -> str:
    t = _tools(tools)
    _ok(t["list_datacards"].call(), "list_datacards")
    ranking = _ok(t["rank_datasets"].call(request=ctx.request), "rank_datasets")
    chosen = ranking["chosen"] or "none"
    plan = _ok(t["write_plan"].call(dataset=chosen, reasons=ranking["explanation"],
                                    target=ranking.get("target") or ""), "write_plan")["plan"]
    return f"{plan['status']}: {plan.get('dataset')} — {ranking['explanation']}"


def data_engineer(tools: list, ctx: JobContext) -> str:
    t = _tools(tools)
    _ok(t["inspect_dataset"].call(), "inspect_dataset")
    result = _ok(t["build_index"].call(), "build_index")
    return result["gate"]


def module_architect(tools: list, ctx: JobContext) -> str:
    t = _tools(tools)
    _ok(t["write_dataloader"].call(), "write_dataloader")
    return _ok(t["validate_dataloader"].call(), "validate_dataloader")["gate"]


def model_trainer(tools: list, ctx: JobContext) -> str:
    t = _tools(tools)
    _ok(t["configure_training"].call(), "configure_training")
    _ok(t["run_training"].call(), "run_training")
    result = _ok(t["evaluate_model"].call(), "evaluate_model")
    return ", ".join(f"{k} {v:.3f}" for k, v in result["metrics"].items()
                     if isinstance(v, (int, float)))


ROUTINES = {"task_manager": task_manager, "data_engineer": data_engineer,
            "module_architect": module_architect, "model_trainer": model_trainer}
