"""Route CrewAI's event bus to the store: one handler set per process, events routed to the job
by the agent or task that emitted them (handlers run on CrewAI's thread pool; they never touch
the UI)."""
from __future__ import annotations

import threading

_routes: dict[str, tuple] = {}       # agent id / task id -> (JobContext, role)
_lock = threading.Lock()
_registered = False


def route(key: str, ctx, role: str) -> None:
    with _lock:
        _routes[str(key)] = (ctx, role)


def unroute(*keys: str) -> None:
    with _lock:
        for key in keys:
            _routes.pop(str(key), None)


def _lookup(event) -> tuple | None:
    for key in (getattr(event, "agent_id", None), getattr(event, "task_id", None)):
        if key and str(key) in _routes:
            return _routes[str(key)]
    return None


def _tokens(usage: dict | None) -> int:
    if not usage:
        return 0
    total = usage.get("total_tokens")
    if total is None:
        total = (usage.get("prompt_tokens") or 0) + (usage.get("completion_tokens") or 0)
    return int(total or 0)


def register_handlers() -> None:
    global _registered
    if _registered:
        return
    from crewai.events import crewai_event_bus
    from crewai.events.types.llm_events import LLMCallCompletedEvent, LLMCallFailedEvent

    @crewai_event_bus.on(LLMCallCompletedEvent)
    def _llm_done(source, event):  # noqa: ANN001
        found = _lookup(event)
        if found:
            ctx, role = found
            call = getattr(event, "call_type", None)
            ctx.event(role, "llm", tool=getattr(call, "value", str(call)),
                      args=f"model={event.model}", result=str(event.response)[:200],
                      tokens=_tokens(event.usage))

    @crewai_event_bus.on(LLMCallFailedEvent)
    def _llm_failed(source, event):  # noqa: ANN001
        found = _lookup(event)
        if found:
            ctx, role = found
            ctx.event(role, "llm", tool="error", result=str(event.error)[:300], ok=False)

    _registered = True


def flush() -> None:
    from crewai.events import crewai_event_bus
    crewai_event_bus.flush(timeout=10)
