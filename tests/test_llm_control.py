"""LLM mode is never worse than autopilot: the real CrewAI crew driven by scripted LLMs that
return garbage, time out, or loop forever. Each job ends finished through the role's autopilot
fallback, within its caps, and the event log says what happened."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from core.jobs.lifecycle import create_job
from crew.control import is_retryable
from crew.runner import run_job
from tests.conftest import tree_digest
from tests.scripted_llm import scripted_factory

REQUEST = "classify pneumonia versus normal chest X-rays"
ROLES = ("Task Manager", "Data Engineer", "Module Architect", "Model Trainer")


def quick_trainer() -> list:
    return [[("configure_training", {"epochs": 2, "early_stopping_patience": 0,
                                     "batch_size": 16})],
            [("run_training", {})], [("evaluate_model", {})], "Scored; for research use only."]


def fallbacks(store, job_id) -> dict:
    out: dict = {}
    for e in store.events(job_id):
        if e["kind"] == "fallback":
            out.setdefault(e["role"], []).append(e["result"])
    return out


def test_retry_classification():
    import httpx
    import openai
    request = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")
    assert is_retryable(TimeoutError("read timed out"))
    assert is_retryable(openai.APITimeoutError(request=request))
    assert is_retryable(openai.RateLimitError("slow down", response=httpx.Response(
        429, request=request), body=None))
    assert is_retryable(RuntimeError("Task execution failed: Error code: 503 overloaded"))
    assert not is_retryable(openai.AuthenticationError("bad key", response=httpx.Response(
        401, request=request), body=None))
    assert not is_retryable(ValueError("Invalid response from LLM call - None or empty."))


@pytest.mark.slow
def test_garbage_llm_ends_in_a_finished_job_through_fallback(settings, store, small):
    """Every role's LLM answers with nonsense: malformed tool arguments, tools that do not
    exist, empty and prose answers. Each gate fails, goes back to the LLM twice, then the
    role's autopilot routine does the stage; the job still ends scored."""
    before = tree_digest(small)
    garbage = [[("write_plan", "{not json")], [("rm_rf", {"path": "/"})],
               "Sure! Here is a poem about lungs instead.", [("no_such_tool", {})],
               "}}}{{{ \x00 garbage", "I cannot help with that."]
    scripts = {k: list(garbage) for k in ("task_manager", "data_engineer", "module_architect",
                                          "model_trainer")}
    local = replace(settings, llm_backoff_s=0.01)
    job_id = create_job(local, store, REQUEST, llm="scripted/garbage", auto_approve=True)
    made: dict = {}
    result = run_job(local, job_id, llm_factory=scripted_factory(scripts, made))
    assert result["status"] == "succeeded", result["error"]
    assert result["metrics"]["auc"] >= 0.5
    fb = fallbacks(store, job_id)
    assert set(fb) == set(ROLES)
    assert all("gate failed 3 times" in texts[0] or "LLM error" in texts[0]
               for texts in fb.values()), fb
    roles = {r["role"]: r for r in result["roles"]}
    assert all(roles[r]["fallback"] and roles[r]["status"] == "succeeded" for r in ROLES)
    # bounded: three answers per role at most (first try + two gate retries), never the 100 cap
    assert all(llm.calls <= 3 * len(garbage) for llm in made.values())
    gates = [e for e in store.events(job_id) if e["kind"] == "gate" and not e["ok"]]
    assert gates and "plan" in gates[0]["tool"]
    assert tree_digest(small) == before


@pytest.mark.slow
def test_llm_that_times_out_is_retried_with_backoff_then_falls_back(settings, store, small,
                                                                   monkeypatch):
    """The provider times out on every call: each role retries with exponential backoff
    (M3B_LLM_RETRIES), then its autopilot routine takes over."""
    scripts = {k: [TimeoutError("Request timed out.")] for k in (
        "task_manager", "data_engineer", "module_architect")}
    scripts["model_trainer"] = quick_trainer()
    waits: list[float] = []
    import crew.control as control
    local = replace(settings, llm_retries=2, llm_backoff_s=0.25)
    original = control.StageControl.__init__

    def recording_init(self, ctx, stage, sleep=None):
        original(self, ctx, stage, sleep=waits.append)
    monkeypatch.setattr(control.StageControl, "__init__", recording_init)
    job_id = create_job(local, store, REQUEST, llm="scripted/timeouts", auto_approve=True)
    made: dict = {}
    result = run_job(local, job_id, llm_factory=scripted_factory(scripts, made))
    assert result["status"] == "succeeded", result["error"]
    assert waits == [0.25, 0.5] * 3  # two retries per timing-out role, doubling
    retries = [e for e in store.events(job_id) if e["kind"] == "llm" and e["tool"] == "retry"]
    assert len(retries) == 6 and "TimeoutError" in retries[0]["result"]
    fb = fallbacks(store, job_id)
    assert set(fb) == {"Task Manager", "Data Engineer", "Module Architect"}
    assert "after 3 attempts" in fb["Task Manager"][0]
    assert made["task_manager"].calls == 3
    roles = {r["role"]: r for r in result["roles"]}
    assert not roles["Model Trainer"]["fallback"] and roles["Model Trainer"]["actions"] == 3


@pytest.mark.slow
def test_llm_that_loops_forever_is_stopped_by_the_action_cap(settings, store, small):
    """Each LLM calls tools forever with fresh arguments (so CrewAI's repeated-call guard never
    fires). The per-role action cap stops it: tools refuse once it is spent, the next LLM call is
    aborted, and autopilot finishes the stage."""
    cap = 5
    scripts = {
        "task_manager": [lambda n: [("rank_datasets", {"request": f"{REQUEST} #{n}"})]],
        "data_engineer": [lambda n: [("build_index", {"test_fraction": 0.2 + n / 1000})]],
        "module_architect": [lambda n: [("write_dataloader", {"image_size": [32 + n, 32 + n]})]],
        "model_trainer": [lambda n: [("configure_training", {"epochs": 1 + n})]],
    }
    local = replace(settings, max_actions=cap)
    job_id = create_job(local, store, REQUEST, llm="scripted/loop", auto_approve=True)
    made: dict = {}
    result = run_job(local, job_id, llm_factory=scripted_factory(scripts, made))
    assert result["status"] == "succeeded", result["error"]
    fb = fallbacks(store, job_id)
    assert set(fb) == set(ROLES)
    assert all("cap reached" in texts[0] and f"its {cap} actions" in texts[0]
               for texts in fb.values()), fb
    caps = [e for e in store.events(job_id) if e["kind"] == "cap"]
    assert {e["role"] for e in caps} == set(ROLES)
    for role_key, llm in made.items():
        assert llm.calls == cap, (role_key, llm.calls)  # cap tool calls; the next is aborted
    # every LLM-driven tool call is logged; after the cap, autopilot's own calls follow
    events = store.events(job_id)
    tm = [e for e in events if e["role"] == "Task Manager" and e["kind"] == "tool"]
    assert [e["tool"] for e in tm[:cap]] == ["rank_datasets"] * cap
    assert tm[cap]["tool"] == "list_datacards"  # the fallback routine's first call
    # the audit table has one row per prompt, with its size; no prompt carries file text
    audit = store.rows("select * from audit where action = 'llm_prompt' and target = ?",
                       [job_id])
    assert len(audit) == sum(llm.calls for llm in made.values())  # one row per prompt sent
    assert all(json.loads(a["detail"])["chars"] > 100 for a in audit)


def test_cost_per_call_from_litellms_local_price_map():
    from crew.events import cost_usd
    usage = {"prompt_tokens": 1000, "completion_tokens": 100}
    priced = cost_usd("openai/gpt-4o", usage)
    assert 0.0 < priced < 1.0
    assert cost_usd("gpt-4o", usage) == priced
    assert cost_usd("openai/local-model", usage) == 0.0  # a local server: no price
    assert cost_usd("scripted", usage) == 0.0 and cost_usd("openai/gpt-4o", None) == 0.0


def test_budget_refuses_after_actions_or_wall_time():
    import time as _time
    from tools.context import Budget
    budget = Budget("Data Engineer", max_actions=2, seconds=60)
    assert budget.refusal() == ""
    budget.actions = 2
    assert "its 2 actions" in budget.refusal()
    late = Budget("Model Trainer", max_actions=100, seconds=5, started=_time.time() - 10)
    assert "5 s of wall time" in late.refusal()


def test_wall_time_cap_stops_a_slow_looping_role(settings, store, registered_demo):
    """A Task Manager that keeps calling tools, slowly: past its wall-time limit tools refuse,
    the next LLM call is aborted, and autopilot writes the plan."""
    import time as _time

    def slow(n):
        _time.sleep(0.4)
        return [("rank_datasets", {"request": f"{REQUEST} {n}"})]
    local = replace(settings, role_time_limit_s=1.5)
    job_id = create_job(local, store, REQUEST, llm="scripted/slow")
    store.update_job(job_id, approval="cancelled")  # planning only
    made: dict = {}
    result = run_job(local, job_id, llm_factory=scripted_factory(
        {"task_manager": [slow], "data_engineer": ["-"], "module_architect": ["-"],
         "model_trainer": ["-"]}, made))
    assert result["status"] == "cancelled" and result["dataset"] == "Demo chest X-ray (synthetic)"
    assert 2 <= made["task_manager"].calls <= 6
    fb = fallbacks(store, job_id)["Task Manager"][0]
    assert "cap reached" in fb and "s of wall time" in fb, fb
