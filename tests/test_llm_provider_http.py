"""The model-string path end to end over HTTP: `openai/<model>` with a base_url, through CrewAI's
native OpenAI client, against a local OpenAI-compatible server (as vLLM / LM Studio would be)."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from core.jobs.lifecycle import create_job
from crew.runner import run_job
from tests.openai_stub_server import StubOpenAI

DEMO = "Demo chest X-ray (synthetic)"
REQUEST = "classify pneumonia versus normal chest X-rays"


def test_openai_compatible_server_plans_through_real_client(settings, store, registered_demo,
                                                          monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    scripts = {"Task Manager": [[("list_datacards", {})],
                                [("rank_datasets", {"request": REQUEST})],
                                [("write_plan", {"dataset": DEMO, "reasons": "fits"})],
                                "Chose the demo dataset."]}
    with StubOpenAI(scripts) as server:
        local = replace(settings, llm="openai/local-model", llm_base_url=server.base_url)
        job_id = create_job(local, store, REQUEST, local.llm)
        store.update_job(job_id, approval="cancelled")  # stop after the plan: no training here
        result = run_job(local, job_id)
    assert result["status"] == "cancelled", result["error"]
    assert result["dataset"] == DEMO
    tm = result["roles"][0]
    assert tm["status"] == "succeeded" and tm["actions"] == 3 and tm["tokens"] >= 4 * 57
    assert len(server.requests) >= 4 and server.requests[0]["model"] == "local-model"
    assert {t["function"]["name"] for t in server.requests[0]["tools"]} == {
        "list_datacards", "rank_datasets", "write_plan"}
    # the key never reaches the store
    dump = str(store.rows("select * from job_events")) + str(store.rows("select * from jobs"))
    assert "sk-test-not-a-real-key" not in dump


SMALL = "Small chest X-ray"


def http_scripts() -> dict:
    return {
        "Task Manager": [[("list_datacards", {})], [("rank_datasets", {"request": REQUEST})],
                         [("write_plan", {"dataset": SMALL, "reasons": "X-ray chest match"})],
                         "Planned."],
        "Data Engineer": [[("preview_dirs", {"path": "dataset"})], [("inspect_dataset", {})],
                          [("build_index", {"test_fraction": 0.25})], "Indexed."],
        "Module Architect": [[("write_dataloader", {"image_size": [32, 32]})],
                             [("validate_dataloader", {})], "Loads."],
        "Model Trainer": [[("configure_training", {"epochs": 2, "early_stopping_patience": 0,
                                                   "batch_size": 16})],
                          [("run_training", {})], [("evaluate_model", {})],
                          "Scored; for research use only."],
    }


@pytest.mark.slow
def test_all_four_roles_through_an_openai_compatible_server(settings, store, small, monkeypatch):
    """A clean LLM-mode run over HTTP: every role's tool calls come from the server through the
    real OpenAI client; tokens are counted per role from the responses' usage."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    with StubOpenAI(http_scripts()) as server:
        local = replace(settings, llm="openai/local-model", llm_base_url=server.base_url)
        job_id = create_job(local, store, REQUEST, local.llm, auto_approve=True)
        result = run_job(local, job_id)
    assert result["status"] == "succeeded", result["error"]
    roles = {r["role"]: r for r in result["roles"]}
    for role, actions in {"Task Manager": 3, "Data Engineer": 3, "Module Architect": 2,
                          "Model Trainer": 3}.items():
        assert roles[role]["status"] == "succeeded" and not roles[role]["fallback"]
        assert roles[role]["actions"] == actions
        assert roles[role]["tokens"] == 57 * (actions + 1)  # the server's usage, per call
        assert roles[role]["cost_usd"] == 0.0  # a local model has no price
    names = {r: sorted({t["function"]["name"] for req in server.requests
                        for t in req.get("tools", []) if r in json.dumps(req["messages"])})
             for r in roles}
    assert "run_script" in names["Data Engineer"] and "write_plan" not in names["Data Engineer"]
    assert "read_files" not in names["Task Manager"]
    dump = json.dumps(server.requests)
    assert "sk-test-not-a-real-key" not in dump  # the key goes in a header, never a prompt


def test_provider_timeout_is_retried_then_autopilot_plans(settings, store, registered_demo,
                                                         monkeypatch):
    """The server answers later than the client's timeout: the real client raises its timeout
    error, the crew retries with backoff, then the Task Manager's autopilot routine plans."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    with StubOpenAI({"Task Manager": [("sleep", 3.0)]}) as server:
        local = replace(settings, llm="openai/local-model", llm_base_url=server.base_url,
                        llm_timeout_s=0.5, llm_retries=1, llm_backoff_s=0.1)
        job_id = create_job(local, store, REQUEST, local.llm)
        store.update_job(job_id, approval="cancelled")
        result = run_job(local, job_id)
    assert result["status"] == "cancelled" and result["dataset"] == DEMO
    assert len(server.requests) == 2  # first try + one retry, no hidden client retries
    events = store.events(job_id)
    retry = [e for e in events if e["kind"] == "llm" and e["tool"] == "retry"]
    assert len(retry) == 1 and "timed out" in retry[0]["result"]
    fallback = [e for e in events if e["kind"] == "fallback"]
    assert "after 2 attempts" in fallback[0]["result"]
