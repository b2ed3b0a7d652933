"""Base class of every M3Builder tool: CrewAI's BaseTool with timing, logging and errors as data.

``_run`` calls :meth:`execute`, which returns a dict. The agent (LLM or autopilot) receives that
dict as JSON text; a ToolError becomes ``{"ok": false, "error": ...}`` so the agent can correct
itself instead of crashing the job.
"""
from __future__ import annotations

import json
import time
from typing import Any

from crewai.tools import BaseTool
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from core.config.faults import pause_point
from core.config.secrets import scrub, scrub_value, secret_values
from tools.context import JobContext, ToolError

MAX_RESULT_CHARS = 6000


def short(value: Any, limit: int = 300) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class NoArgs(BaseModel):
    """Arguments of a tool that takes none."""


class M3Tool(BaseTool):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    ctx: JobContext = Field(exclude=True)
    role: str = ""
    _last_result: dict = PrivateAttr(default_factory=dict)

    def execute(self, **kwargs: Any) -> dict:  # overridden by every tool
        raise ToolError(f"{self.name} has no implementation")

    def summarise(self, result: dict) -> str:
        return short(result)

    def _run(self, **kwargs: Any) -> str:
        pause_point(self.name)  # the fault suite's kill point (core/config/faults.py)
        started = time.time()
        refusal = self.ctx.over_budget(self.role)
        self.ctx.count_action(self.role)
        try:
            if refusal:
                raise ToolError(refusal)
            result = {"ok": True, **self.execute(**kwargs)}
        except ToolError as exc:
            result = {"ok": False, "error": str(exc)}
        except Exception as exc:  # a bug or an unexpected input: report, don't crash the crew
            result = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        # scrubbed before anything is cut short, so no part of a secret is left behind
        secrets = secret_values()
        shown = scrub_value(json.loads(json.dumps(result, default=str)), secrets)
        logged = self.summarise(shown) if result["ok"] else short(shown)
        self.ctx.event(self.role, "tool", tool=self.name,
                       args=short(scrub_value(json.loads(json.dumps(kwargs, default=str)),
                                              secrets)),
                       result=scrub(logged, secrets)[0], seconds=time.time() - started,
                       ok=result["ok"])
        self._last_result = result  # autopilot's own (never leaves the process)
        text = scrub(json.dumps(shown), secrets)[0]  # never a key to the LLM
        if len(text) > MAX_RESULT_CHARS:
            text = text[:MAX_RESULT_CHARS] + f"... [{len(text) - MAX_RESULT_CHARS} chars cut]"
        return text

    def call(self, **kwargs: Any) -> dict:
        """Autopilot's entry: the same validated path an LLM's tool call takes."""
        self.run(**kwargs)
        return self._last_result
