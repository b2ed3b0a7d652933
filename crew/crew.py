"""Build the CrewAI crew from the YAML config: four agents, each with only its role's tools, and
four tasks run in order. Each task's guardrail is its stage's gate (a failed gate goes back to
the agent with the gate's message, then the stage falls back to the role's autopilot routine);
the later tasks only run when the previous gate passed (and, after planning, when the user
approved the plan). Each agent is a RoleAgent bound to its StageControl (crew/control.py):
caps, LLM-error retries with backoff, fallback."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import yaml
from crewai import Crew, Process, Task
from crewai.tasks.conditional_task import ConditionalTask

from crew import events
from crew.control import GATE_RETRIES, RoleAgent, StageControl
from crew.stages import STAGES
from tools.context import JobContext
from tools.registry import tools_for

CONFIG_DIR = Path(__file__).parent / "config"


def load_config() -> tuple[dict, dict]:
    agents = yaml.safe_load((CONFIG_DIR / "agents.yaml").read_text())
    tasks = yaml.safe_load((CONFIG_DIR / "tasks.yaml").read_text())
    return agents, tasks


def build_crew(ctx: JobContext, llm_factory: Callable[[str], object],
               may_continue: Callable[[int], bool],
               controls: list[StageControl] | None = None) -> tuple[Crew, list[RoleAgent]]:
    """``llm_factory(role_key)`` gives each agent its own LLM instance (honest token counts).
    ``may_continue(i)`` decides whether stage i (1..3) runs: the previous gate passed and, for
    the Data Engineer, the plan is ready and approved. ``controls`` (one per stage) carry the
    caps and the fallback; made here when not given."""
    agents_cfg, tasks_cfg = load_config()
    controls = controls or [StageControl(ctx, stage) for stage in STAGES]
    agents, tasks = [], []
    for i, stage in enumerate(STAGES):
        a_cfg, t_cfg = agents_cfg[stage.role_key], tasks_cfg[stage.task_key]
        # CrewAI's iteration limit sits just above the action cap: the cap (tools refuse, the
        # LLM-call hook stops the agent) is what ends a looping agent, with a clear reason
        agent = RoleAgent(role=a_cfg["role"], goal=a_cfg["goal"].strip(),
                          backstory=a_cfg["backstory"].strip(), llm=llm_factory(stage.role_key),
                          tools=tools_for(stage.role_key, ctx),
                          max_iter=ctx.settings.max_actions + 2,
                          allow_delegation=False, verbose=False).bind(controls[i])
        description = t_cfg["description"].replace("{request}", ctx.request.replace("{", "(")
                                                    .replace("}", ")"))
        common = dict(description=description, expected_output=t_cfg["expected_output"].strip(),
                      agent=agent, guardrail=controls[i].guardrail(),
                      guardrail_max_retries=GATE_RETRIES + 1)
        task = (Task(**common) if i == 0 else
                ConditionalTask(condition=lambda _out, i=i: may_continue(i), **common))
        events.route(agent.id, ctx, stage.role)
        events.route(task.id, ctx, stage.role)
        agents.append(agent)
        tasks.append(task)
    crew = Crew(agents=agents, tasks=tasks, process=Process.sequential, memory=False,
                verbose=False)
    return crew, agents
