"""The job a tool works for: settings, store, job id, workspace. Tools never reach outside it.

The job's dataset folder is the one the parent fixed in the store when the plan was approved
(core.jobs.dataset_root), never what ``plan.json`` says later: children may rewrite the plan.
The context reads that record once and keeps it for the job's life."""
from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from core.config.settings import Settings
from core.store.db import Store
from core.jobs.dataset_root import (DatasetRootError, fix_dataset_root, stored_dataset_root)
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
    # (dataset name, real folder) fixed by the parent at approval; read once from the store
    fixed_dataset: tuple[str, Path] | None = field(default=None, repr=False)

    @property
    def workspace(self) -> JobWorkspace:
        return JobWorkspace(self.settings.jobs_dir / self.job_id)

    def raw_plan(self) -> dict:
        """plan.json as it is on disk (a child may have rewritten it since approval)."""
        if not self.workspace.plan.exists():
            raise ToolError("there is no plan.json yet: the Task Manager must write the plan first")
        plan = read_json_bounded(self.workspace.plan, MAX_PLAN_BYTES)
        if not isinstance(plan, dict):
            raise ToolError("plan.json does not hold a JSON object; the Task Manager writes the "
                            "plan again")
        return plan

    def plan(self) -> dict:
        """The plan, with the dataset (name and folder) the parent fixed at approval in place
        of whatever plan.json says now."""
        plan = self.raw_plan()
        fixed = self.fixed_dataset or self._stored_dataset()
        if fixed is not None and plan.get("status") == "ready":
            plan["dataset"], plan["dataset_path"] = fixed[0], str(fixed[1])
        return plan

    def _stored_dataset(self) -> tuple[str, Path] | None:
        if self.fixed_dataset is None:
            self.fixed_dataset = stored_dataset_root(self.store, self.job_id)
        return self.fixed_dataset

    def fix_dataset_root(self) -> Path | None:
        """Parent only, when the plan is approved: check the plan's dataset against the registry
        and record its folder in the store for the rest of the job (ToolError when refused)."""
        try:
            root = fix_dataset_root(self.settings, self.store, self.job_id, self.raw_plan())
        except DatasetRootError as exc:
            raise ToolError(str(exc)) from exc
        self.fixed_dataset = None
        return root if root is None else self._stored_dataset()[1]

    def dataset_root(self) -> Path | None:
        """The job's dataset folder: the record fixed at approval, kept for the job's life.
        A job with a plan but no record yet (approved by an older version, or tools called
        outside the job runner) gets it fixed now from the plan's *registered* dataset; None
        when the plan names no dataset or the job has no row. ToolError when refused."""
        fixed = self._stored_dataset()
        if fixed is None:
            try:
                plan = self.raw_plan()
            except ToolError:
                return None
            if plan.get("status") != "ready" or self.store.job(self.job_id) is None:
                return None
            self.fix_dataset_root()
            fixed = self._stored_dataset()
        return fixed[1] if fixed else None

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


MAX_PLAN_BYTES = 1 << 20          # plan.json, train_config.json: small files the system writes
MAX_SUMMARY_BYTES = 16 << 20      # Logout/train_summary.json


def read_json_bounded(path: Path, limit: int) -> object:
    """A workspace JSON file the system wrote, read only when it is at most ``limit`` bytes
    (checked before reading: a child may have replaced it by a huge file). ToolError otherwise,
    saying what, how big, the limit and what to do."""
    try:
        size = os.stat(path).st_size
    except OSError as exc:
        raise ToolError(f"cannot read {path.name}: {exc.strerror}") from None
    if size > limit:
        raise ToolError(f"{path.name} is {size / 1e6:.1f} MB, more than the {limit / 1e6:.1f} MB "
                        f"the system reads for it; it was not written by the system: run the "
                        f"step that writes it again")
    with open(path, "rb") as fh:
        data = fh.read(limit + 1)
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ToolError(f"{path.name} is not valid JSON ({exc}); run the step that writes it "
                        f"again") from None


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
