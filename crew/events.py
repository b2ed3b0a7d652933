"""Route CrewAI's event bus to the store: one handler set per process, events routed to the job
by the agent or task that emitted them (handlers run on CrewAI's thread pool; they never touch
the UI). A before-LLM-call hook enforces each role's caps, takes secrets out of the prompt as a
last line of defence, and writes one audit row per prompt: its size and which files tools
summarised into it (never their text)."""
from __future__ import annotations

import json
import threading

from core.config.secrets import scrub, scrub_text, secret_values

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


def _scrub(messages: list) -> int:
    """Replace any secret value found in the prompt (in place): text content, the text parts
    of a multi-part content, tool calls' arguments; how many were replaced."""
    secrets, hits = secret_values(), 0

    def clean(holder: dict, key: str) -> None:
        nonlocal hits
        if isinstance(holder.get(key), str):
            holder[key], found = scrub(holder[key], secrets)
            hits += found

    for message in messages:
        if not isinstance(message, dict):
            continue
        clean(message, "content")
        for part in message.get("content") if isinstance(message.get("content"), list) else []:
            if isinstance(part, dict):
                clean(part, "text")
        for call in message.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                clean(function, "arguments")
    return hits


def cost_usd(model: str, usage: dict | None) -> float:
    """The provider's price for one call from litellm's local price map; 0 when the model is
    not in it (local servers, scripted test LLMs)."""
    if not usage or not model:
        return 0.0
    try:
        import litellm
        name = next((m for m in (model, model.split("/", 1)[-1]) if m in litellm.model_cost),
                    None)
        if name is None:
            return 0.0
        prompt, completion = litellm.cost_per_token(
            model=name, prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0))
        return float(prompt + completion)
    except Exception:  # noqa: BLE001 - a price is never worth failing a job
        return 0.0


def _before_llm(context) -> None:  # noqa: ANN001
    from crewai.hooks.dispatch import HookAborted
    found = _lookup_id(getattr(getattr(context, "agent", None), "id", None))
    if not found:
        return None
    ctx, role = found
    refusal = ctx.over_budget(role)
    if refusal:
        ctx.event(role, "cap", tool="llm", result=refusal, ok=False)
        raise HookAborted(refusal, source="m3builder-caps")
    messages = context.messages
    removed = _scrub(messages)
    chars = sum(len(m.get("content") or "") if isinstance(m.get("content"), str)
                else len(json.dumps(m.get("content"), default=str)) for m in messages)
    files, ctx.summarised[:] = sorted(set(ctx.summarised)), []
    # names only (never text); bounded so the row stays valid JSON within the audit's 2000 chars
    named = [f if len(f) <= 80 else "..." + f[-77:] for f in files[:15]]
    ctx.store.audit(role, "llm_prompt", ctx.job_id, json.dumps(
        {"messages": len(messages), "chars": chars, "files_summarised": named,
         "more_files": len(files) - len(named), "secrets_removed": removed}))
    return None


def _lookup_id(key) -> tuple | None:  # noqa: ANN001
    with _lock:
        return _routes.get(str(key)) if key else None


def register_handlers() -> None:
    global _registered
    if _registered:
        return
    from crewai.hooks import register_before_llm_call_hook
    register_before_llm_call_hook(_before_llm)
    from crewai.events import crewai_event_bus
    from crewai.events.types.llm_events import LLMCallCompletedEvent, LLMCallFailedEvent

    @crewai_event_bus.on(LLMCallCompletedEvent)
    def _llm_done(source, event):  # noqa: ANN001
        found = _lookup(event)
        if found:
            ctx, role = found
            call = getattr(event, "call_type", None)
            ctx.event(role, "llm", tool=getattr(call, "value", str(call)),
                      args=f"model={event.model}",
                      result=scrub_text(str(event.response))[:200],
                      tokens=_tokens(event.usage), cost=cost_usd(event.model, event.usage))

    @crewai_event_bus.on(LLMCallFailedEvent)
    def _llm_failed(source, event):  # noqa: ANN001
        found = _lookup(event)
        if found:
            ctx, role = found
            ctx.event(role, "llm", tool="error", result=scrub_text(str(event.error))[:300],
                      ok=False)

    _registered = True


def flush() -> None:
    from crewai.events import crewai_event_bus
    crewai_event_bus.flush(timeout=10)
