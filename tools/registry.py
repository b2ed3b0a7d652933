"""Which tools each role gets (and only those)."""
from __future__ import annotations

from tools.data_engineer import data_engineer_tools
from tools.model_trainer import model_trainer_tools
from tools.module_architect import module_architect_tools
from tools.task_manager import task_manager_tools

ROLE_TOOLS = {
    "task_manager": task_manager_tools,
    "data_engineer": data_engineer_tools,
    "module_architect": module_architect_tools,
    "model_trainer": model_trainer_tools,
}


def tools_for(role_key: str, ctx) -> list:
    return ROLE_TOOLS[role_key](ctx)
