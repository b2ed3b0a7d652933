"""Which tools each role gets (and only those): its high-level tools first (the autopilot looks
them up by name), then its share of the jailed file tools (``tools/files.py``)."""
from __future__ import annotations

from tools.data_engineer import data_engineer_tools
from tools.files import file_tools_for
from tools.model_trainer import model_trainer_tools
from tools.module_architect import module_architect_tools
from tools.task_manager import task_manager_tools

ROLE_TOOLS = {
    "task_manager": task_manager_tools,
    "data_engineer": data_engineer_tools,
    "module_architect": module_architect_tools,
    "model_trainer": model_trainer_tools,
}
ROLE_NAMES = {
    "task_manager": "Task Manager",
    "data_engineer": "Data Engineer",
    "module_architect": "Module Architect",
    "model_trainer": "Model Trainer",
}


def tools_for(role_key: str, ctx) -> list:
    high_level = ROLE_TOOLS[role_key](ctx)
    taken = {tool.name for tool in high_level}
    extra = [t for t in file_tools_for(role_key, ctx, ROLE_NAMES[role_key]) if t.name not in taken]
    return high_level + extra
