"""The job a tool works for: settings, store, job id, workspace. Tools never reach outside it."""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from core.config.settings import Settings
from core.store.db import Store
from core.jobs.gates import GateMemo, GateResult
from core.jobs.workspace import JobWorkspace


@dataclass
class JobContext:
    settings: Settings
    store: Store
    job_id: str
    request: str
    # files whose content (or a summary of it) a tool returned to the agent since the last LLM
    # call; the audit row of the next prompt names them (never their text)
    summarised: list[str] = field(default_factory=list)
    # each gate's last verdict and the workspace state it judged (a gate runs once per state)
    gates: GateMemo = field(default_factory=GateMemo)
    # LLM mode only: each role's bounds (role name -> Budget); autopilot runs unbounded
    budgets: dict[str, "Budget"] = field(default_factory=dict)

    @property
    def workspace(self) -> JobWorkspace:
        return JobWorkspace(self.settings.jobs_dir / self.job_id)

    def plan(self) -> dict:
        if not self.workspace.plan.exists():
            raise ToolError("there is no plan.json yet: the Task Manager must write the plan first")
        return self.workspace.read_plan()

    def gate(self, name: str, check: Callable[[], GateResult]) -> GateResult:
        """The verdict of gate ``name`` on the workspace as it is now, run at most once."""
        return self.gates.run(name, self.workspace, check)

    def note_summarised(self, *paths) -> None:
        self.summarised.extend(str(p) for p in paths)

    def over_budget(self, role: str) -> str:
        """Why the role may not act any more ("" while it may)."""
        budget = self.budgets.get(role)
        return budget.refusal() if budget else ""

    def count_action(self, role: str) -> None:
        if role in self.budgets:
            self.budgets[role].actions += 1

    def event(self, role: str, kind: str, **fields) -> None:
        self.store.add_event(self.job_id, role, kind, **fields)


class ToolError(RuntimeError):
    """A tool could not do what was asked; the message tells the agent what to change."""


@dataclass
class Budget:
    """A role's bounds in LLM mode: tool calls (the paper's 100 actions) and wall time."""
    role: str
    max_actions: int
    seconds: float
    started: float = field(default_factory=time.time)
    actions: int = 0

    def refusal(self) -> str:
        if self.actions >= self.max_actions:
            return (f"{self.role} has used its {self.max_actions} actions: no more tool calls; "
                    "give your final answer now")
        if time.time() - self.started > self.seconds:
            return (f"{self.role} has used its {self.seconds:.0f} s of wall time: no more tool "
                    "calls; give your final answer now")
        return ""
