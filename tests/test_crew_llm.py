"""The real CrewAI crew, driven offline by scripted LLMs that make real tool calls for every
role. Nothing of the crew is faked: agents, tasks, guardrails (gates) and tools are the real
ones; only the LLM's words are scripted."""
from __future__ import annotations

import json

import pytest

from core.jobs.lifecycle import create_job
from crew.runner import run_job
from tests.conftest import tree_digest
from tests.scripted_llm import ScriptedLLM, scripted_factory

DEMO = "Demo chest X-ray (synthetic)"
REQUEST = "classify pneumonia versus normal chest X-rays"


def scripts(dataset: str = DEMO) -> dict:
    return {
        "task_manager": [[("list_datacards", {})], [("rank_datasets", {"request": REQUEST})],
                         [("write_plan", {"dataset": dataset, "reasons": "X-ray chest match"})],
                         "Chose the demo dataset."],
        "data_engineer": [[("inspect_dataset", {})], [("build_index", {"test_fraction": 0.2})],
                          "Index written; gate passed."],
        "module_architect": [[("write_dataloader", {"image_size": [64, 64]})],
                             [("validate_dataloader", {})], "Every sample loads."],
        "model_trainer": [[("configure_training", {"epochs": 2, "early_stopping_patience": 0,
                                                   "batch_size": 32, "num_processes": 2})],
                          [("run_training", {})], [("evaluate_model", {})],
                          "Metrics reported; for research use only."],
    }


@pytest.mark.slow
def test_scripted_llm_drives_all_four_roles(settings, store, registered_demo, demo_folder):
    before = tree_digest(demo_folder)
    job_id = create_job(settings, store, REQUEST, llm="scripted/test", auto_approve=True)
    made: dict = {}
    result = run_job(settings, job_id, llm_factory=scripted_factory(scripts(), made))
    assert result["status"] == "succeeded", result["error"]
    assert set(result["metrics"]) == {"auc", "accuracy", "f1_macro", "sensitivity",
                                      "specificity", "ece"}
    roles = {r["role"]: r for r in result["roles"]}
    assert [r["role"] for r in result["roles"]] == ["Task Manager", "Data Engineer",
                                                    "Module Architect", "Model Trainer"]
    expected_actions = {"Task Manager": 3, "Data Engineer": 2, "Module Architect": 2,
                        "Model Trainer": 3}
    for role, n in expected_actions.items():
        assert roles[role]["status"] == "succeeded"
        assert roles[role]["actions"] == n, roles[role]
        assert roles[role]["tokens"] >= 100 * (n + 1)  # one call per tool step + final answer
    events = store.events(job_id)
    tools_by_role = {}
    for e in events:
        if e["kind"] == "tool":
            tools_by_role.setdefault(e["role"], []).append(e["tool"])
    assert tools_by_role["Module Architect"] == ["write_dataloader", "validate_dataloader"]
    assert any(e["kind"] == "llm" and e["tokens"] == 100 for e in events)
    # the LLM asked for two processes: training ran under torchrun (DDP, gloo on CPU)
    summary = json.loads((settings.jobs_dir / job_id / "Logout" / "train_summary.json")
                         .read_text())
    assert summary["global_step"] == 2 * -(-summary["num_train"] // 64)
    # the LLM's image-size choice reached the real dataloader
    check = json.loads((settings.jobs_dir / job_id / "Datapath" / "dataloader_check.json")
                       .read_text())
    assert check["shapes"] == [[1, 64, 64]]
    # prompts carry metadata only: no pixel arrays, no raw bytes
    prompt_text = json.dumps(made["data_engineer"].seen_messages, default=str)
    assert "PNEUMONIA" in prompt_text and "\\x89PNG" not in prompt_text
    assert tree_digest(demo_folder) == before


def test_role_sees_only_its_tools(settings, store, registered_demo):
    from crew.crew import build_crew
    from tools.context import JobContext
    job_id = create_job(settings, store, REQUEST, llm="scripted/test", auto_approve=True)
    ctx = JobContext(settings, store, job_id, REQUEST)
    crew, agents = build_crew(ctx, lambda role: ScriptedLLM(model="s", script=["done"]),
                              lambda i: False)
    names = {a.role: sorted(t.name for t in a.tools) for a in agents}
    # the high-level tools autopilot uses, plus each role's share of the paper's eight
    assert names == {
        "Task Manager": ["list_datacards", "rank_datasets", "write_plan"],
        "Data Engineer": sorted(["inspect_dataset", "build_index", "list_files", "preview_dirs",
                                 "preview_files", "read_files", "copy_files", "write_files",
                                 "edit_files", "run_script", "script_status"]),
        "Module Architect": sorted(["write_dataloader", "validate_dataloader", "list_files",
                                    "read_files", "preview_files", "write_files", "edit_files",
                                    "run_script", "script_status"]),
        "Model Trainer": sorted(["configure_training", "run_training", "training_status",
                                 "evaluate_model", "list_files", "read_files", "write_files",
                                 "edit_files", "run_script", "script_status"]),
    }
    # every tool has a schema an LLM can call: a description and typed, described arguments
    for agent in agents:
        for tool in agent.tools:
            assert len(tool.description) > 40, tool.name
            schema = tool.args_schema.model_json_schema()
            for name, prop in schema.get("properties", {}).items():
                assert prop.get("description"), f"{tool.name}.{name} has no description"
    assert crew.process.value == "sequential" and len(crew.tasks) == 4


def test_wrong_dataset_is_corrected_after_tool_error(settings, store, registered_demo):
    """The LLM first names a dataset that does not exist; the tool's error goes back to it and
    it corrects itself. Planning only (the plan is then cancelled)."""
    job_id = create_job(settings, store, REQUEST, llm="scripted/test")
    store.update_job(job_id, approval="cancelled")
    script = scripts()
    script["task_manager"] = [[("write_plan", {"dataset": "ChestXray14", "reasons": "guess"})],
                              [("list_datacards", {})],
                              [("write_plan", {"dataset": DEMO, "reasons": "demo fits"})],
                              "Chose the demo dataset."]
    made: dict = {}
    result = run_job(settings, job_id, llm_factory=scripted_factory(script, made))
    assert result["status"] == "cancelled"
    events = [e for e in store.events(job_id) if e["kind"] == "tool"]
    assert [e["ok"] for e in events] == [0, 1, 1]
    assert "no datacard named 'ChestXray14'" in events[0]["result"]
    assert "no datacard named" in json.dumps(made["task_manager"].seen_messages, default=str)
    assert result["dataset"] == DEMO


def test_llm_that_never_plans_gets_the_gate_message_then_autopilot_plans(settings, store,
                                                                         registered_demo):
    """No tool call at all: the plan gate's message goes back to the LLM twice, then the Task
    Manager's autopilot routine writes the plan, and the event log says so."""
    job_id = create_job(settings, store, REQUEST, llm="scripted/test")
    store.update_job(job_id, approval="cancelled")  # planning only
    script = scripts()
    script["task_manager"] = ["I think the demo dataset is best."]  # no tool call at all
    made: dict = {}
    result = run_job(settings, job_id, llm_factory=scripted_factory(script, made))
    assert result["status"] == "cancelled", result["error"]
    assert result["dataset"] == DEMO  # chosen by the fallback routine
    assert made["task_manager"].calls == 3  # first answer + two gate retries
    later_prompts = json.dumps(made["task_manager"].seen_messages[1:], default=str)
    assert "plan.json is missing" in later_prompts
    events = store.events(job_id)
    fallback = [e for e in events if e["kind"] == "fallback"]
    assert fallback and fallback[0]["role"] == "Task Manager"
    assert "gate failed 3 times" in fallback[0]["result"]
    tools = [e["tool"] for e in events if e["kind"] == "tool"]
    assert tools == ["list_datacards", "rank_datasets", "write_plan"]
    tm = result["roles"][0]
    assert tm["fallback"] and tm["status"] == "succeeded"
    assert {r["role"]: r["status"] for r in result["roles"]}["Data Engineer"] == "skipped"
