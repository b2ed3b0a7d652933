"""Run one job to its end: the four stages in order, gates between them, the approval step
after planning, and a result in the CLI's contract. Autopilot calls each role's routine; with an
LLM the CrewAI crew runs the same tasks with the same tools and gates."""
from __future__ import annotations

import json
import os
import time
from collections.abc import Callable

from core.jobs.lifecycle import set_approval, wait_for_approval
from core.config.settings import AUTOPILOT, Settings
from core.store.db import open_store
from crew.autopilot import ROUTINES, StageError
from crew.stages import STAGES, check_evaluated
from tools.context import JobContext, ToolError
from tools.registry import tools_for
from tools.scripts import stop_background


class JobRunner:
    def __init__(self, settings: Settings, job_id: str,
                 llm_factory: Callable[[str], object] | None = None):
        self.settings = settings
        self.store = open_store(settings.store_path)
        self.job = self.store.job(job_id)
        if self.job is None:
            raise ValueError(f"no job {job_id} in {settings.store_path}")
        self.ctx = JobContext(settings, self.store, job_id, self.job["request"])
        self.llm_factory = llm_factory
        self.stage_status = {s.role_key: "skipped" for s in STAGES}
        self.stage_started: dict[str, float] = {}
        self.stage_seconds: dict[str, float] = {}
        self.outcome, self.error = "", ""
        self.agents: list = []
        self.controls: list = []

    # ------------------------------------------------------------------ shared steps
    def _begin(self, i: int) -> None:
        stage = STAGES[i]
        self.stage_started[stage.role_key] = time.time()
        self.stage_status[stage.role_key] = "running"
        self.store.update_job(self.ctx.job_id, stage=stage.role)
        self.ctx.event(stage.role, "stage", tool="start")

    def _end(self, i: int, ok: bool, message: str) -> None:
        stage = STAGES[i]
        stopped = stop_background(self.ctx.job_id)  # a role's scripts end with its stage
        if stopped:
            self.ctx.event(stage.role, "info", tool="stop_background",
                           result=f"stopped {stopped} background script(s) at the stage's end")
        seconds = time.time() - self.stage_started.get(stage.role_key, time.time())
        self.stage_seconds[stage.role_key] = seconds
        self.stage_status[stage.role_key] = "succeeded" if ok else "failed"
        self.ctx.event(stage.role, "stage", tool="end", result=message[:400], seconds=seconds,
                       ok=ok)

    def _gate(self, i: int):
        stage = STAGES[i]
        gate = stage.gate(self.ctx)
        self.ctx.event(stage.role, "gate", tool=gate.gate, result=gate.message()[:1000],
                       ok=gate.ok)
        return gate

    def _after_plan(self) -> bool:
        """No dataset, or approval: decide whether building goes on."""
        job = self.store.job(self.ctx.job_id) or {}
        if job.get("approval") == "approved" and job.get("dataset_root"):
            return True  # approved and fixed in an earlier run of this job (resumed): plan.json,
            # which children may have written since, is not read again
        plan = self.ctx.workspace.read_plan()
        self.store.update_job(self.ctx.job_id, dataset=plan.get("dataset") or "",
                              task=plan.get("task") or "")
        if plan["status"] == "no_dataset":
            self.outcome = "no_dataset"
            return False
        job = self.store.job(self.ctx.job_id)
        if job.get("approval") == "approved":
            return self._fix_dataset()
        if job.get("auto_approve"):
            set_approval(self.store, self.ctx.job_id, "approved", actor="auto-approve (--yes)")
            return self._fix_dataset()
        self.store.update_job(self.ctx.job_id, status="awaiting_approval")
        decision = wait_for_approval(self.store, self.ctx.job_id)
        if decision != "approved":
            self.outcome = "cancelled"
            return False
        self.store.update_job(self.ctx.job_id, status="running")
        return self._fix_dataset()

    def _fix_dataset(self) -> bool:
        """The plan is approved (no child has run yet): fix the dataset folder the job may read
        in the store, from the approved plan's registered dataset. Later changes to plan.json
        (children may write it) never change it."""
        try:
            self.ctx.fix_dataset_root()
        except ToolError as exc:
            self.outcome, self.error = "failed", f"approval: {exc}"
            return False
        return True

    def _stop_requested(self) -> bool:
        if (self.store.job(self.ctx.job_id) or {}).get("stop_requested"):
            self.outcome = "stopped"
            return True
        return False

    # ------------------------------------------------------------------ autopilot
    def _run_autopilot(self, first: int = 0) -> None:
        """The stages from ``first`` on (a resumed job skips those that finished), the approval
        step before the first one after planning."""
        for i, stage in enumerate(STAGES):
            if i < first:
                continue
            if i == max(first, 1) and not self._after_plan():
                return
            if self._stop_requested():
                return
            self._begin(i)
            try:
                summary = ROUTINES[stage.role_key](tools_for(stage.role_key, self.ctx), self.ctx)
            except StageError as exc:
                self._end(i, False, str(exc))
                self.outcome, self.error = "failed", f"{stage.role}: {exc}"
                return
            gate = self._gate(i)
            self._end(i, gate.ok, summary if gate.ok else gate.message())
            if not gate.ok:
                self.outcome, self.error = "failed", f"{stage.role}: {gate.message()}"
                return
        self.outcome = "succeeded"

    # ------------------------------------------------------------------ LLM crew
    def _may_continue(self, i: int) -> bool:
        if self.outcome:  # already halted (no dataset, cancelled, failed)
            return False
        gate = self._gate(i - 1)
        self._end(i - 1, gate.ok, gate.message())
        if not gate.ok:
            self.outcome, self.error = "failed", f"{STAGES[i - 1].role}: {gate.message()}"
            return False
        if i == 1 and not self._after_plan():
            return False
        if self._stop_requested():
            return False
        self._begin(i)
        self.controls[i].start()
        return True

    def _run_crew(self) -> None:
        from crew import events
        from crew.control import StageControl
        from crew.crew import build_crew
        from crew.llm import make_llm

        events.register_handlers()
        factory = self.llm_factory or (lambda _role: make_llm(
            self.job["llm"], self.settings.llm_base_url, timeout_s=self.settings.llm_timeout_s,
            api_key_env=self.settings.llm_key_env))
        self.controls = [StageControl(self.ctx, stage) for stage in STAGES]
        crew, self.agents = build_crew(self.ctx, factory, self._may_continue, self.controls)
        self._begin(0)
        self.controls[0].start()
        try:
            crew.kickoff()
        except Exception as exc:  # guardrail retries exhausted, LLM errors, tool crashes
            running = [s for s in STAGES if self.stage_status[s.role_key] == "running"]
            if running:
                self._end(STAGES.index(running[0]), False, str(exc))
            if not self.outcome:
                role = running[0].role if running else "crew"
                self.outcome, self.error = "failed", f"{role}: {type(exc).__name__}: {exc}"
        finally:
            events.flush()
            events.unroute(*[a.id for a in self.agents], *[t.id for t in crew.tasks])
            self.ctx.budgets.clear()
        if self.outcome:
            return
        last = len(STAGES) - 1
        gate = self._gate(last)
        self._end(last, gate.ok, gate.message())
        self.outcome = "succeeded" if gate.ok else "failed"
        if not gate.ok:
            self.error = f"{STAGES[last].role}: {gate.message()}"

    # ------------------------------------------------------------------ run and report
    def run(self) -> dict:
        job_id = self.ctx.job_id
        self.store.update_job(job_id, status="running", started_at=time.time(), pid=os.getpid())
        mode = self.job["llm"] or AUTOPILOT
        self.ctx.event("System", "info", tool="start",
                       result=f"mode={'autopilot' if mode == AUTOPILOT else 'llm'}")
        try:
            if mode == AUTOPILOT:
                self._run_autopilot()
            else:
                self._run_crew()
        except Exception as exc:  # never leave a job 'running' behind
            self.outcome, self.error = "failed", f"{type(exc).__name__}: {exc}"
        finally:
            stop_background(job_id)  # scripts an agent left running in the background
        if self.outcome == "succeeded":
            verdict = check_evaluated(self.ctx)
            if not verdict.ok:  # never "succeeded" without the system's evaluator's scores
                self.outcome, self.error = "failed", verdict.message()
        if self.outcome == "succeeded" and (self.store.job(job_id) or {}).get("stop_requested"):
            self.outcome = "stopped"  # stopped during training: the best model so far is scored
        result = self.result()
        self.store.update_job(job_id, status=result["status"], finished_at=time.time(),
                              error=self.error, result=result, stage="")
        self.ctx.event("System", "info", tool="end",
                       result=f"{result['status']} {self.error}"[:400],
                       ok=result["status"] in ("succeeded", "no_dataset"))
        return result

    def _roles(self) -> list[dict]:
        events = self.store.events(self.ctx.job_id)
        out = []
        for stage in STAGES:
            mine = [e for e in events if e["role"] == stage.role]
            tokens = sum(e["tokens"] for e in mine if e["kind"] == "llm")
            cost = sum(e.get("cost") or 0.0 for e in mine if e["kind"] == "llm")
            agent = next((a for a in self.agents if a.role == stage.role), None)
            usage = getattr(getattr(agent, "llm", None), "get_token_usage_summary", None)
            if usage:
                tokens = max(tokens, int(usage().total_tokens or 0))
            out.append({"role": stage.role, "status": self.stage_status[stage.role_key],
                        "actions": sum(1 for e in mine if e["kind"] == "tool"),
                        "seconds": round(self.stage_seconds.get(stage.role_key, 0.0), 2),
                        "tokens": tokens, "cost_usd": round(cost, 6),
                        "fallback": any(e["kind"] == "fallback" for e in mine)})
        return out

    def result(self) -> dict:
        ws = self.ctx.workspace
        plan = ws.read_plan() if ws.plan.exists() else {}
        report = json.loads(ws.report.read_text()) if ws.report.exists() else {}
        succeeded = self.outcome in ("succeeded", "stopped") and bool(report)
        return {"status": self.outcome or "failed", "job_id": self.ctx.job_id,
                "dataset": plan.get("dataset"), "task": plan.get("task"),
                "metrics": report.get("metrics", {}) if succeeded else {},
                "ci95": report.get("ci95", {}) if succeeded else {},
                "model_dir": str(ws.model_dir) if succeeded else None,
                "model": ((self.store.model(self.ctx.job_id) or {}).get("name")
                          if succeeded else None),  # its name: <dataset> <task> v<N>
                "workspace": str(ws.root), "roles": self._roles(), "error": self.error or None,
                "reasons": plan.get("reasons"), "llm": self.job["llm"]}


def run_job(settings: Settings, job_id: str,
            llm_factory: Callable[[str], object] | None = None) -> dict:
    return JobRunner(settings, job_id, llm_factory).run()
