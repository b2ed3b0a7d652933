"""The model-string path end to end over HTTP: `openai/<model>` with a base_url, through CrewAI's
native OpenAI client, against a local OpenAI-compatible server (as vLLM / LM Studio would be)."""
from __future__ import annotations

from dataclasses import replace

from core.jobs import create_job
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
