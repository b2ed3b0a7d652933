"""A scripted LLM for offline tests of the real CrewAI crew: a BaseLLM whose replies are OpenAI
style tool calls (run by CrewAI's real tool-calling machinery into our real tools), then a final
answer. It reports token usage through CrewAI's own events, like a provider would."""
from __future__ import annotations

import json
from typing import Any

from crewai.events.types.llm_events import LLMCallType
from crewai.llms.base_llm import BaseLLM
from pydantic import Field, PrivateAttr


class ScriptedLLM(BaseLLM):
    """``script``: a list of steps; a step is a list of (tool_name, arguments) calls (arguments
    a dict, or a str sent as the raw, possibly malformed, JSON text), a str (the final answer),
    an Exception (raised, as a provider error would be), or a callable ``f(call_number)``
    returning one of those. After the script runs out, the last step repeats."""

    script: list[Any] = Field(default_factory=list)
    tokens_per_call: int = 100
    _step: int = PrivateAttr(default=0)
    seen_messages: list[Any] = Field(default_factory=list)

    def supports_function_calling(self) -> bool:
        return True

    def call(self, messages, tools=None, callbacks=None, available_functions=None,
             from_task=None, from_agent=None, response_model=None):
        self.seen_messages.append(messages)
        step = self.script[min(self._step, len(self.script) - 1)]
        self._step += 1
        if callable(step) and not isinstance(step, type):
            step = step(self._step)
        if isinstance(step, BaseException):
            raise step
        if isinstance(step, str):
            response: Any = step
        else:
            response = [{"id": f"call_{self._step}_{i}", "type": "function",
                         "function": {"name": name, "arguments": args if isinstance(args, str)
                                      else json.dumps(args)}}
                        for i, (name, args) in enumerate(step)]
        usage = {"prompt_tokens": self.tokens_per_call - 20, "completion_tokens": 20,
                 "total_tokens": self.tokens_per_call, "successful_requests": 1}
        self._track_token_usage_internal(usage)
        self._emit_call_completed_event(
            response=response, call_type=LLMCallType.TOOL_CALL if not isinstance(step, str)
            else LLMCallType.LLM_CALL, from_task=from_task, from_agent=from_agent,
            messages=messages, usage=usage)
        return response

    @property
    def calls(self) -> int:
        return self._step

    def get_context_window_size(self) -> int:
        return 128_000


def scripted_factory(scripts: dict, made: dict):
    """An ``llm_factory`` for the runner: each role key gets a ScriptedLLM playing its script;
    ``made`` collects them so a test can read what each one was sent."""
    def make(role_key: str) -> ScriptedLLM:
        made[role_key] = ScriptedLLM(model="scripted", script=scripts[role_key])
        return made[role_key]
    return make
