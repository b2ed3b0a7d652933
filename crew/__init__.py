"""M3Builder's crew: four role agents (Task Manager, Data Engineer, Module Architect, Model
Trainer) run in sequence by CrewAI with an LLM, or by deterministic autopilot without one."""
from core.config.bootstrap import apply as _process_setup

_process_setup()  # before crewai is imported anywhere
