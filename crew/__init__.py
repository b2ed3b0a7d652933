"""M3Builder's crew: four role agents (Task Manager, Data Engineer, Module Architect, Model
Trainer) run in sequence by CrewAI with an LLM, or by deterministic autopilot without one."""
import core  # noqa: F401  (process set-up before crewai is imported anywhere)
