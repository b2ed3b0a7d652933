"""Resume a stopped, failed or interrupted job (``python -m crew.worker JOB --resume``, queued by
``core.jobs.lifecycle.prepare_resume``). Two ways, chosen as ``core.jobs.lifecycle.resume_mode`` says:

* **From a checkpoint** (training saved one): the plan, index and dataloader of the first run
  are reused once their gates pass again (the dataset folder may have moved since), and the
  Model Trainer runs ``run_training`` (the template continues from the newest checkpoint) and
  ``evaluate_model``. A gate that fails ends the job ``failed``: the checkpoint belongs to
  that index and dataloader, so they are not made again.
* **From the stage that did not finish** (killed while planning, awaiting approval, indexing,
  checking the dataloader, or before training's first checkpoint): a stage counts as finished
  when its last run ended successfully and its gate passes again now; the first one that did
  not finish, and every one after it, runs again. An approved plan is final: if it fails its
  gate the job fails rather than being planned and approved again. A plan never approved is
  offered for approval again.

Both ways run deterministically (autopilot's routines with the same tools and gates), also for
a job started with an LLM: what the LLM made and its gate passed is kept, and no LLM is asked
again.
"""
from __future__ import annotations

from core.jobs.lifecycle import checkpoint_problem
from crew.autopilot import StageError
from crew.runner import JobRunner
from crew.stages import STAGES
from tools.registry import tools_for

TRAINER = len(STAGES) - 1
RESUME_TOOLS = ("run_training", "evaluate_model")


class ResumeRunner(JobRunner):
    """A JobRunner that goes on from where the job's earlier run ended."""

    def _run_autopilot(self, first: int = 0) -> None:
        self._resume()

    def _run_crew(self) -> None:
        self._resume()

    def _earlier_events(self) -> list[dict]:
        return [e for e in self.store.events(self.ctx.job_id) if e["kind"] == "stage"]

    def _resume(self) -> None:
        earlier = self._earlier_events()
        try:
            if not checkpoint_problem(self.job["workspace"]):  # as prepare_resume decided
                self._resume_training()
            else:
                self._continue(earlier)
        finally:  # a role's seconds cover all its runs
            for stage in STAGES:
                seconds = sum(float(e["seconds"] or 0.0) for e in earlier
                              if e["role"] == stage.role and e["tool"] == "end")
                self.stage_seconds[stage.role_key] = (
                    self.stage_seconds.get(stage.role_key, 0.0) + seconds)

    # ------------------------------------------------------------ from the unfinished stage
    @staticmethod
    def _finished(earlier: list[dict]) -> set[str]:
        """The roles whose last stage event was a successful end."""
        last: dict[str, dict] = {}
        for event in earlier:
            last[event["role"]] = event
        return {role for role, e in last.items() if e["tool"] == "end" and e["ok"]}

    def _continue(self, earlier: list[dict]) -> None:
        finished = self._finished(earlier)
        approved = (self.store.job(self.ctx.job_id) or {}).get("approval") == "approved"
        first = 0
        for i, stage in enumerate(STAGES[:TRAINER]):
            if stage.role not in finished:
                break
            gate = self._gate(i)
            if not gate.ok:
                if i == 0 and approved:
                    self.stage_status[stage.role_key] = "failed"
                    self.outcome = "failed"
                    self.error = (f"{stage.role}: {gate.message()} (the approved plan, checked "
                                  "again before resuming)")
                    return
                break
            self.stage_status[stage.role_key] = "succeeded"
            first = i + 1
        kept = ", ".join(s.role for s in STAGES[:first]) or "nothing"
        self.ctx.event("System", "info", tool="resume",
                       result=f"continuing from the {STAGES[first].role} by autopilot; kept "
                              f"(finished and checked again): {kept}")
        JobRunner._run_autopilot(self, first)

    # ------------------------------------------------------------ from the newest checkpoint
    def _resume_training(self) -> None:
        for i, stage in enumerate(STAGES[:TRAINER]):
            gate = self._gate(i)
            if not gate.ok:
                self.stage_status[stage.role_key] = "failed"
                self.outcome = "failed"
                self.error = f"{stage.role}: {gate.message()} (checked again before resuming)"
                return
            self.stage_status[stage.role_key] = "succeeded"
        if self._stop_requested():
            return
        self._begin(TRAINER)
        tools = {t.name: t for t in tools_for(STAGES[TRAINER].role_key, self.ctx)}
        try:
            for name in RESUME_TOOLS:
                result = tools[name].call()
                if not result.get("ok"):
                    raise StageError(f"{name}: {result.get('error')}")
        except StageError as exc:
            self._end(TRAINER, False, f"resumed training: {exc}")
            self.outcome, self.error = "failed", f"{STAGES[TRAINER].role}: {exc}"
            return
        gate = self._gate(TRAINER)
        self._end(TRAINER, gate.ok, "resumed from the newest checkpoint: " + gate.message())
        if not gate.ok:
            self.outcome, self.error = "failed", f"{STAGES[TRAINER].role}: {gate.message()}"
            return
        self.outcome = "succeeded"


def resume_job(settings, job_id: str) -> dict:
    return ResumeRunner(settings, job_id).run()
