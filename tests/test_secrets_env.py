"""Secrets are recognised by their values, not only by their variables' names (issue 14, escape
2): children start from an allow-list environment, and every text that leaves the process (tool
results, the event log, prompts, the worker's log) is scrubbed of the values of all parent
variables that look secret. The planted variables are the ones a hostile script read before:
a password under a name without KEY/TOKEN, a database URL and an LLM gateway URL with
credentials, a JWT, and the LLM key itself in a variable that M3B_LLM_KEY_ENV names."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest

from core.config import secrets
from core.config.secret_shapes import value_secrets
from core.config.secrets import (REMOVED, child_env, scrub, secret_values, worker_env)
from tests.test_sandbox_tools import make_dataset, make_job

GATEWAY_PASS = "Gw-passw0rd-7781!"
DB_PASSWORD = "p4ssw0rd-Long"
DATABASE_URL = f"postgres://u:{DB_PASSWORD}@db/x"
PRIVATE_JWT = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJtM2J1aWxkZXIiLCJpYXQiOjE3MDB9."
               "Q2hlY2tTaWduYXR1cmUxMjM0NTY3ODk")
GW_PASSWORD = "s3cretpass"
LLM_BASE_URL = f"https://user:{GW_PASSWORD}@gw.local/v1"
LLM_KEY = "sk-live-abc123def456ghi789"
PLANTED = {"GATEWAY_PASS": GATEWAY_PASS, "DATABASE_URL": DATABASE_URL,
           "PRIVATE_JWT": PRIVATE_JWT, "M3B_LLM_BASE_URL": LLM_BASE_URL,
           "M3B_LLM_KEY_ENV": "MY_GATEWAY", "MY_GATEWAY": LLM_KEY}
# what must never be seen: each secret value, and the password part of each URL
LEAKS = (GATEWAY_PASS, DB_PASSWORD, PRIVATE_JWT, GW_PASSWORD, LLM_KEY)
PRINT_ENV = """
import json, os
print("ENV", json.dumps(dict(os.environ), sort_keys=True))
try:
    print("PROC", open("/proc/self/environ", "rb").read().decode(errors="replace"))
except OSError as exc:
    print("PROC refused", type(exc).__name__)
"""


@pytest.fixture
def planted(monkeypatch):
    for name, value in PLANTED.items():
        monkeypatch.setenv(name, value)
    return PLANTED


def assert_no_leak(text: str) -> None:
    for leak in LEAKS:
        assert leak not in text, f"{leak!r} leaked"


# -- which values look secret ----------------------------------------------------------------
MUST_SCRUB = [
    ("sk-live-abc123def456ghi789", "sk-live-abc123def456ghi789"),
    (PRIVATE_JWT, PRIVATE_JWT),
    ("ghp_16C7e42F292c6912E7710c838347Ae178B4a", "ghp_16C7e42F292c6912E7710c838347Ae178B4a"),
    ("AKIAIOSFODNN7EXAMPL3", "AKIAIOSFODNN7EXAMPL3"),
    ("d41d8cd98f00b204e9800998ecf8427e", "d41d8cd98f00b204e9800998ecf8427e"),
    ("x7Kq9Zp2Lm4Vn8Rt", "x7Kq9Zp2Lm4Vn8Rt"),
    ("Bearer abc123def456ghi789jkl", "abc123def456ghi789jkl"),
    (DATABASE_URL, DB_PASSWORD),
    (DATABASE_URL, f"u:{DB_PASSWORD}"),
    (LLM_BASE_URL, GW_PASSWORD),
    ("https://user:pw@gw.local/v1", "user:pw@"),
    ("https://gw.local/v1?api_key=abcdefgh12", "abcdefgh12"),
    ("amqp://guest:hunter2hunter2@broker:5672//", "hunter2hunter2"),
]
MUST_NOT_SCRUB = ["en_US.UTF-8", "C.UTF-8", "/usr/bin:/bin", "/usr/local/bin:/usr/bin:/bin",
                  "xterm-256color", "true", "False", "8080", "123456789012", "0.25",
                  "chest_xray_pneumonia_v2", "ChestXRay2017Balanced", "Small chest X-ray",
                  "resnet18_imagenet_v1_pretrained", "nnUNetTrainer_250epochs",
                  "https://gw.local/v1", "http://127.0.0.1:8000/v1",
                  "123e4567-e89b-12d3-a456-426614174000", "ignore::FutureWarning",
                  "MyCompanyProductionCluster", "expandable_segments:True",
                  "rs=0:di=01;34:ln=01;36:mh=00:pi=40;33", "/home/someone/.m3builder",
                  "~/datasets/chest", "M3Builder-2025-01-15-run42", "openai/gpt-4o-mini"]


@pytest.mark.parametrize("value,secret", MUST_SCRUB)
def test_a_value_shaped_like_a_secret_is_scrubbed_whatever_its_name(value, secret):
    found = secret_values({"SOME_SETTING": value})
    assert secret in found
    text, hits = scrub(f"value: {secret}.", found)
    assert secret not in text and hits >= 1 and REMOVED in text


@pytest.mark.parametrize("value", MUST_NOT_SCRUB)
def test_an_ordinary_value_is_left_alone(value):
    assert value_secrets(value) == []
    assert secret_values({"SOME_SETTING": value}) == []
    assert scrub(f"value: {value}.", secret_values({"SOME_SETTING": value})) == \
        (f"value: {value}.", 0)


def test_names_and_the_key_variable_still_mark_secrets():
    assert "hunter2hunter2" in secret_values({"GATEWAY_PASS": "hunter2hunter2"})
    assert "hunter2hunter2" in secret_values({"DB_PASSWORD": "hunter2hunter2"})
    # a plain word is no secret by its shape, but it is when M3B_LLM_KEY_ENV names it
    assert secret_values({"MY_GATEWAY": "plainwordkey"}) == []
    assert "plainwordkey" in secret_values({"M3B_LLM_KEY_ENV": "MY_GATEWAY",
                                            "MY_GATEWAY": "plainwordkey"})
    # the setting holds a variable's name, not a secret; short values are settings
    assert secret_values({"M3B_LLM_KEY_ENV": "MY_GATEWAY_VARIABLE"}) == []
    assert secret_values({"API_TOKEN": "short"}) == []


def test_secret_values_follow_changes_to_the_environment(monkeypatch):
    fresh = "Zx9Qw8Er7Ty6Ui5Op4"
    assert fresh not in secret_values()
    monkeypatch.setenv("SOME_NEW_SETTING", fresh)
    assert fresh in secret_values()
    monkeypatch.delenv("SOME_NEW_SETTING")
    assert fresh not in secret_values()


def test_scrub_takes_out_every_planted_value(planted):
    text = "\n".join([f"{k}={v}" for k, v in planted.items()]
                     + [f"password {DB_PASSWORD}", f"gateway {GW_PASSWORD}",
                        json.dumps({"key": LLM_KEY, "jwt": PRIVATE_JWT})])
    clean, hits = scrub(text)
    assert_no_leak(clean)
    assert hits >= len(LEAKS)
    assert "postgres://" in clean and "gw.local/v1" in clean  # the addresses stay


def test_scrub_also_catches_the_json_escaped_form(monkeypatch):
    secret = 'hunter2"quoted\\slash'
    monkeypatch.setenv("SERVICE_PASSWORD", secret)
    escaped = json.dumps({"v": secret})
    assert secret not in escaped  # the raw form is not in the JSON text ...
    assert json.dumps(secret)[1:-1] not in scrub(escaped)[0]  # ... and the escaped one is gone


# -- child environments ----------------------------------------------------------------------
def test_a_child_process_sees_none_of_the_planted_values(planted, tmp_path):
    extra = {"M3B_WORKSPACE": str(tmp_path), "HOME": str(tmp_path), "TMPDIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", PRINT_ENV], env=child_env(extra),
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert_no_leak(done.stdout + done.stderr)
    seen = json.loads(done.stdout.split("ENV ", 1)[1].splitlines()[0])
    assert not set(planted) & set(seen), sorted(set(planted) & set(seen))
    assert seen["M3B_WORKSPACE"] == str(tmp_path) and seen["HOME"] == str(tmp_path)
    assert seen["PATH"] == os.environ["PATH"] and seen["PYTHONUNBUFFERED"] == "1"
    assert seen["OTEL_SDK_DISABLED"]  # telemetry stays off in children


def test_child_env_is_an_allow_list(monkeypatch):
    monkeypatch.setenv("SOME_HARMLESS_SETTING", "hello")
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    monkeypatch.setenv("M3B_ALLOW_UNCONFINED_SCRIPTS", "1")
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", LLM_KEY)                     # allowed name, key
    monkeypatch.setenv("NCCL_DEBUG_URL", f"http://u:{GW_PASSWORD}@h/x")  # allowed name, creds
    env = child_env()
    assert "SOME_HARMLESS_SETTING" not in env and "M3B_ALLOW_UNCONFINED_SCRIPTS" not in env
    assert env["OMP_NUM_THREADS"] == "2" and env["LC_ALL"] == "C.UTF-8"
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert "NCCL_SOCKET_IFNAME" not in env
    assert env["NCCL_DEBUG_URL"] == "http://h/x"
    assert "HOME" not in child_env() and child_env({"HOME": "/x"})["HOME"] == "/x"
    # the test suite's store guard reaches a job's children (tests/conftest.py store_guard)
    monkeypatch.setenv("M3B_TEST_STORE_GUARD", "/h/store.db|/g/refused.log|/g/pids.log")
    monkeypatch.setenv("PYTHONPATH", "/g")
    env = child_env()
    assert env["M3B_TEST_STORE_GUARD"].startswith("/h/store.db")
    assert env["PYTHONPATH"].split(os.pathsep)[-1] == "/g"


def test_the_worker_gets_the_llm_key_by_name_and_nothing_else_secret(planted):
    env = worker_env({"M3B_HOME": "/h"}, llm="openai/gpt-4o", key_env="MY_GATEWAY")
    assert env["MY_GATEWAY"] == LLM_KEY and env["M3B_LLM_KEY_ENV"] == "MY_GATEWAY"
    assert env["M3B_LLM_BASE_URL"] == LLM_BASE_URL  # the worker talks to the gateway
    assert env["M3B_HOME"] == "/h"
    for name in ("GATEWAY_PASS", "DATABASE_URL", "PRIVATE_JWT"):
        assert name not in env
    autopilot = worker_env({"M3B_HOME": "/h"}, key_env="MY_GATEWAY")
    assert "MY_GATEWAY" not in autopilot
    assert LLM_KEY not in json.dumps(autopilot)


def test_a_key_variable_named_only_in_the_settings_file_is_scrubbed_by_the_worker(
        monkeypatch):
    monkeypatch.delenv("M3B_LLM_KEY_ENV", raising=False)
    monkeypatch.setenv("HOSPITAL_GATEWAY", "plainwordkey")
    env = worker_env(llm="openai/gpt-4o", key_env="HOSPITAL_GATEWAY")
    assert env["M3B_LLM_KEY_ENV"] == "HOSPITAL_GATEWAY"
    assert "plainwordkey" in secret_values(env)  # what the worker's own scrub will see


def test_launch_worker_starts_the_worker_with_worker_env(planted, settings, store,
                                                        monkeypatch):
    from core.jobs import launcher
    from core.jobs.lifecycle import create_job
    started: list[dict] = []

    class Recorder:
        def __init__(self, *args, **kwargs):
            started.append(kwargs["env"])
            self.pid = os.getpid()

    monkeypatch.setattr(launcher.subprocess, "Popen", Recorder)
    for llm, key_seen in (("openai/gpt-4o", True), ("autopilot", False)):
        job_id = create_job(settings, store, "classify pneumonia", llm=llm, auto_approve=True)
        launcher.launch_worker(settings, store, job_id)
        env = started[-1]
        assert ("MY_GATEWAY" in env) is key_seen
        for name in ("GATEWAY_PASS", "DATABASE_URL", "PRIVATE_JWT"):
            assert name not in env


# -- confined scripts, tool results and the event log ----------------------------------------
@pytest.fixture
def job(planted, settings, store, tmp_path, monkeypatch):
    from runtime import landlock
    from tools import scripts
    from tools.confinement import UNCONFINED_ENV
    if landlock.abi_version() == 0:  # the environment is the point here, not Landlock
        monkeypatch.setenv(UNCONFINED_ENV, "1")
    ctx = make_job(settings, store, make_dataset(tmp_path / "tiny_dataset"))
    (ctx.workspace.root / "scripts").mkdir(exist_ok=True)
    (ctx.workspace.root / "scripts" / "print_env.py").write_text(PRINT_ENV)
    yield ctx
    scripts.stop_background(ctx.job_id)


def test_a_confined_script_sees_none_of_the_planted_values(job):
    from tools.sandbox import Jail
    from tools.scripts import run_script
    result = run_script(Jail(job), job.job_id, "scripts/print_env.py")
    out = result["output"]
    assert result["returncode"] == 0, out
    assert "ENV {" in out and "M3B_WORKSPACE" in out  # the script did print its environment
    assert_no_leak(out)  # the raw output, before any scrubbing
    for name in PLANTED:
        assert f'"{name}"' not in out


def test_tool_results_and_the_event_log_are_scrubbed(job, store):
    from tools.files import FILE_TOOLS
    tools = {name: FILE_TOOLS[name](ctx=job, role="Data Engineer")
             for name in ("write_files", "read_files", "run_script")}
    # the logged arguments are cut at 300 characters: the first secret straddles the cut, so
    # scrubbing after cutting would leave its first 10 characters in the log
    before = len(json.dumps({"path": "scripts/leaky.txt", "content": ""})) - 2
    content = "x" * (297 - 10 - before - 1) + " " + " ".join(LEAKS) + "\n"
    written = tools["write_files"].run(path="scripts/leaky.txt", content=content)
    read = tools["read_files"].run(paths=["scripts/leaky.txt"])
    leaky = "print(" + repr(" ".join(LEAKS)) + ")\n"
    tools["write_files"].run(path="scripts/leaky.py", content=leaky)
    ran = tools["run_script"].run(script="scripts/leaky.py")
    for text in (written, read, ran):  # what the LLM receives
        assert_no_leak(text)
    assert REMOVED in read and REMOVED in ran
    events = store.events(job.job_id)
    assert len(events) >= 4
    logged = json.dumps(events)
    assert_no_leak(logged)
    for leak in LEAKS:
        assert leak[:10] not in logged, f"part of {leak!r} leaked"


def test_prompts_are_scrubbed_in_every_part(planted):
    from crew.events import _scrub
    messages = [{"role": "user", "content": f"key {LLM_KEY}"},
                {"role": "user", "content": [{"type": "text", "text": f"jwt {PRIVATE_JWT}"}]},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"function": {"name": "x", "arguments": json.dumps({"p": DB_PASSWORD})}}]}]
    assert _scrub(messages) == 3
    assert_no_leak(json.dumps(messages))


def test_the_worker_log_is_scrubbed(planted):
    from crew.worker import ScrubbedStream
    sink = io.StringIO()
    stream = ScrubbedStream(sink)
    stream.write(f"ConnectionError: {LLM_BASE_URL} refused; key={LLM_KEY}\n")
    stream.flush()
    assert_no_leak(sink.getvalue())
    assert "gw.local/v1" in sink.getvalue()


def test_the_cache_is_not_shared_with_explicit_environments(planted):
    assert LLM_KEY in secret_values()
    assert secret_values({}) == []
    assert LLM_KEY in secret_values()
    assert secrets._cache is not None


def test_the_store_scrubs_events_errors_results_and_audit_rows(planted, settings, store):
    from core.jobs.lifecycle import create_job
    job_id = create_job(settings, store, "classify pneumonia", llm="openai/gpt-4o")
    store.add_event(job_id, "System", "info", tool="x", args=f"url={LLM_BASE_URL}",
                    result="y" * 3990 + LLM_KEY)  # cut at 4000: scrubbed first
    store.update_job(job_id, error=f"APIConnectionError: {LLM_BASE_URL} key {LLM_KEY}",
                     result={"error": f"jwt {PRIVATE_JWT}", "status": "failed"})
    store.audit("Data Engineer", "llm_prompt", job_id, f"{GATEWAY_PASS} {DB_PASSWORD}")
    rows = (store.events(job_id), store.job(job_id),
            store.rows("select * from audit where target = ?", [job_id]))
    assert_no_leak(json.dumps(rows))
    assert LLM_KEY[:10] not in json.dumps(rows[0])
    assert "gw.local/v1" in rows[1]["error"] and json.loads(rows[1]["result"])["status"] == \
        "failed"
