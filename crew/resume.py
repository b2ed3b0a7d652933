"""Resume a stopped or failed job's training from its newest checkpoint.

``core.jobs.lifecycle.prepare_resume`` sets ``"resume": true`` in the job's train_config.json and
queues the job; ``python -m crew.worker JOB --resume`` then runs :class:`ResumeRunner`: the plan,
index and dataloader of the first run are reused once their gates pass again (the dataset folder
may have moved since), and the Model Trainer runs ``run_training`` (the template continues from
the newest checkpoint) and ``evaluate_model`` with the same tools, logging and gate as a first
run.
Both modes run this step deterministically: the training configuration was decided in the
first run, so no LLM is asked again.
"""
from __future__ import annotations

from crew.autopilot import StageError
from crew.runner import JobRunner
from crew.stages import STAGES
from tools.registry import tools_for

TRAINER = len(STAGES) - 1
RESUME_TOOLS = ("run_training", "evaluate_model")


class ResumeRunner(JobRunner):
    """A JobRunner whose run is only the Model Trainer's training (resumed) and evaluation."""

    def _run_autopilot(self) -> None:
        self._resume_training()

    def _run_crew(self) -> None:
        self._resume_training()

    def _earlier_seconds(self) -> dict[str, float]:
        events = self.store.events(self.ctx.job_id)
        return {s.role_key: sum(float(e["seconds"] or 0.0) for e in events
                                if e["role"] == s.role and e["kind"] == "stage"
                                and e["tool"] == "end") for s in STAGES}

    def _resume_training(self) -> None:
        earlier = self._earlier_seconds()
        try:
            self._resume_stages()
        finally:  # a role's seconds cover all its runs
            for key, seconds in earlier.items():
                self.stage_seconds[key] = self.stage_seconds.get(key, 0.0) + seconds

    def _resume_stages(self) -> None:
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
