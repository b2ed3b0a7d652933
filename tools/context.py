"""The job a tool works for: settings, store, job id, workspace. Tools never reach outside it."""
from __future__ import annotations

from dataclasses import dataclass

from core.settings import Settings
from core.store import Store
from core.workspace import JobWorkspace


@dataclass
class JobContext:
    settings: Settings
    store: Store
    job_id: str
    request: str

    @property
    def workspace(self) -> JobWorkspace:
        return JobWorkspace(self.settings.jobs_dir / self.job_id)

    def plan(self) -> dict:
        if not self.workspace.plan.exists():
            raise ToolError("there is no plan.json yet: the Task Manager must write the plan first")
        return self.workspace.read_plan()

    def event(self, role: str, kind: str, **fields) -> None:
        self.store.add_event(self.job_id, role, kind, **fields)


class ToolError(RuntimeError):
    """A tool could not do what was asked; the message tells the agent what to change."""
