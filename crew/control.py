"""What keeps an LLM-driven role safe and bounded, and never worse than autopilot.

* Caps: each role has a Budget (the paper's 100 actions, a wall-time limit). Tools refuse once it
  is spent; a before-LLM-call hook (crew/events.py) then stops the agent with CrewAI's HookAborted.
* LLM errors (timeout, rate limit, lost connection, server error) are retried with exponential
  backoff; errors that a retry cannot fix (bad key, unknown model) are not.
* Gates: a failed gate goes back to the agent with the gate's message (CrewAI guardrail retries);
  when those are spent, or the LLM cannot go on, the role's autopilot routine does the stage and
  the event log says so (kind "fallback").
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from crewai import Agent
from pydantic import PrivateAttr

from crew.autopilot import ROUTINES, StageError
from crew.stages import Stage
from tools.context import Budget, JobContext
from tools.registry import tools_for

GATE_RETRIES = 2  # a failed gate goes back to the agent this many times, then autopilot

_RETRYABLE_NAMES = ("timeout", "ratelimit", "connection", "serviceunavailable",
                    "internalserver", "apierror", "overloaded", "gateway")
_RETRYABLE_TEXT = ("timed out", "timeout", "rate limit", "429", "502", "503", "504",
                   "overloaded", "connection", "temporarily")
_FATAL_NAMES = ("authentication", "permissiondenied", "notfound", "badrequest")


def _chain(exc: BaseException) -> list[BaseException]:
    out, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        out.append(exc)
        exc = exc.__cause__ or exc.__context__
    return out


def is_cap(exc: BaseException) -> bool:
    from crewai.hooks.dispatch import HookAborted
    return any(isinstance(e, HookAborted) for e in _chain(exc))


def is_retryable(exc: BaseException) -> bool:
    """Errors a later attempt may not meet: timeouts, rate limits, dropped connections, 5xx."""
    chain = _chain(exc)
    names = " ".join(type(e).__name__.lower() for e in chain)
    if any(n in names for n in _FATAL_NAMES):
        return False
    if any(isinstance(e, (TimeoutError, ConnectionError)) for e in chain):
        return True
    if any(n in names for n in _RETRYABLE_NAMES):
        return True
    text = " ".join(str(e).lower() for e in chain)
    return any(t in text for t in _RETRYABLE_TEXT)


class StageControl:
    """One job's bounds and fallbacks, shared by its agents, guardrails and the LLM-call hook."""

    def __init__(self, ctx: JobContext, stage: Stage, sleep: Callable[[float], None] = time.sleep):
        self.ctx, self.stage, self.sleep = ctx, stage, sleep
        self.settings = ctx.settings
        self.fallback_summary: str | None = None
        self.fallback_reason = ""
        self.gate_failures = 0

    @property
    def role(self) -> str:
        return self.stage.role

    def start(self) -> None:
        self.ctx.budgets[self.role] = Budget(self.role, self.settings.max_actions,
                                             self.settings.role_time_limit_s)

    def fallback(self, reason: str) -> str:
        """Do the stage with the role's autopilot routine (once per stage); say so in the log."""
        if self.fallback_summary is not None:
            return self.fallback_summary
        self.fallback_reason = reason
        self.ctx.budgets.pop(self.role, None)  # autopilot's own tool calls are not capped
        self.ctx.event(self.role, "fallback", tool="autopilot", result=reason[:1000], ok=False)
        try:
            summary = ROUTINES[self.stage.role_key](tools_for(self.stage.role_key, self.ctx),
                                                    self.ctx)
        except StageError as exc:
            summary = f"autopilot fallback could not finish the stage either: {exc}"
            self.ctx.event(self.role, "fallback", tool="autopilot", result=summary[:1000],
                           ok=False)
        else:
            self.ctx.event(self.role, "fallback", tool="autopilot",
                           result=f"done: {summary}"[:1000])
        self.fallback_summary = f"Autopilot fallback ({reason[:200]}): {summary}"
        return self.fallback_summary

    def guardrail(self):
        """CrewAI function guardrail: the stage's gate. Failures go back to the agent
        ``GATE_RETRIES`` times; the last one hands the stage to autopilot."""
        def check(output):
            gate = self.stage.gate(self.ctx)
            if gate.ok:
                return True, output
            self.gate_failures += 1
            self.ctx.event(self.role, "gate", tool=gate.gate, result=gate.message()[:1000],
                           ok=False)
            if self.gate_failures <= GATE_RETRIES or self.fallback_summary is not None:
                return False, gate.message()
            self.fallback(f"the {gate.gate} gate failed {self.gate_failures} times: "
                          f"{gate.message()}")
            gate = self.stage.gate(self.ctx)
            return (True, self.fallback_summary) if gate.ok else (False, gate.message())
        return check


class RoleAgent(Agent):
    """A CrewAI Agent whose task execution retries LLM errors with backoff and, when the LLM
    cannot go on (errors that persist, a spent cap), hands the stage to autopilot."""

    _control: StageControl | None = PrivateAttr(default=None)

    def bind(self, control: StageControl) -> "RoleAgent":
        self._control = control
        self.max_retry_limit = 0  # retries are ours (with backoff), not CrewAI's immediate ones
        return self

    def execute_task(self, task: Any, context: str | None = None, tools: list | None = None):
        control = self._control
        if control is None:
            return super().execute_task(task, context, tools)
        if control.fallback_summary is not None:
            return control.fallback_summary  # the stage is autopilot's now
        settings = control.settings
        for attempt in range(settings.llm_retries + 1):
            try:
                self._times_executed = 0
                return super().execute_task(task, context, tools)
            except Exception as exc:  # noqa: BLE001 - every LLM failure ends in a decision
                what = f"{type(exc).__name__}: {exc}"[:500]
                if is_cap(exc):
                    return control.fallback(f"cap reached: {what}")
                if not is_retryable(exc):
                    return control.fallback(f"LLM error: {what}")
                if attempt == settings.llm_retries:
                    return control.fallback(f"LLM error after {attempt + 1} attempts: {what}")
                wait = settings.llm_backoff_s * (2 ** attempt)
                control.ctx.event(control.role, "llm", tool="retry",
                                  result=f"attempt {attempt + 1} failed ({what}); retrying in "
                                         f"{wait:.1f} s", ok=False)
                control.sleep(wait)
        return control.fallback("no attempt left")  # unreachable; keeps the type checker calm
