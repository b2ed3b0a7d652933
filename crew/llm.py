"""LLMs from a model string. CrewAI's native providers avoid litellm (openai/ with an optional
base_url for any OpenAI-compatible server such as vLLM or LM Studio, ollama/, anthropic/,
gemini/, azure/, bedrock/, hosted_vllm/); any other string goes through litellm. Keys come from
the environment (or .streamlit/secrets.toml, which Streamlit copies into it); never logged."""
from __future__ import annotations

import os

NATIVE_PREFIXES = ("openai/", "anthropic/", "ollama/", "gemini/", "azure/", "bedrock/",
                   "hosted_vllm/")


def make_llm(model: str, base_url: str | None = None, timeout_s: float = 120.0,
             api_key_env: str = ""):
    """``api_key_env`` names a variable other than the provider's usual one (the Settings
    page's "key variable"); its value goes to the client and nowhere else. The client's own
    retries are off: crew/control.py retries with backoff and then falls back, once."""
    from crewai import LLM
    kwargs: dict = {"model": model, "timeout": timeout_s, "temperature": 0.0}
    if model.startswith("openai/"):
        kwargs["max_retries"] = 0
    if base_url:
        kwargs["base_url"] = base_url
    if api_key_env and os.environ.get(api_key_env):
        kwargs["api_key"] = os.environ[api_key_env]
    if not model.startswith(NATIVE_PREFIXES):
        kwargs["_skip_mcp_handler"] = True  # litellm path: avoid crewai's mcp import clash
    return LLM(**kwargs)


def describe(model: str) -> str:
    """A printable name: the model string only, never a key or URL credentials."""
    return model.split("@")[-1]
