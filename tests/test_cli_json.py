"""The CLI's machine-readable contract: every command that offers --json (found in the argparse
parser itself, not a hand-kept list) prints exactly one JSON document on stdout, when it works
and when it refuses (then an object with an "error" key and a non-zero exit status)."""
from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest

from crew.cli import build_parser, main
from tests.conftest import ROOT


def json_commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()):
    """(command words, its parser) for every leaf command that has a --json option."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from json_commands(sub, (*prefix, name))
            return
    if "--json" in parser._option_string_actions:
        yield prefix, parser


def minimal_argv(words: tuple[str, ...], parser: argparse.ArgumentParser) -> list[str]:
    """The command with a placeholder for every required argument."""
    argv = list(words)
    for action in parser._actions:
        if not action.option_strings and action.nargs is None:
            argv.append("placeholder")
        elif action.option_strings and action.required:
            argv += [action.option_strings[0], "placeholder"]
    return argv


COMMANDS = dict(json_commands(build_parser()))


def run_cli(capsys, argv: list[str]) -> tuple[int, object]:
    code = main(argv)
    out = capsys.readouterr().out
    try:
        return code, json.loads(out)
    except ValueError:
        pytest.fail(f"{argv}: stdout is not one JSON document: {out[:500]!r}")


def assert_error(code: int, data, argv) -> dict:
    assert code != 0, argv
    assert isinstance(data, dict) and isinstance(data.get("error"), str) and data["error"], \
        (argv, data)
    return data


def test_the_parser_offers_json_on_every_command_that_matters():
    names = {" ".join(words) for words in COMMANDS}
    assert {"register", "build", "jobs", "show", "resume", "evaluate", "demo", "bench",
            "store check", "store backup", "store restore"} <= names


@pytest.mark.parametrize("words", sorted(COMMANDS), ids=" ".join)
def test_refusals_are_json(capsys, tmp_path, words):
    argv = minimal_argv(words, COMMANDS[words])
    not_a_folder = tmp_path / "a-file"
    not_a_folder.write_text("")
    code, data = run_cli(capsys, [*argv, "--json", "--home", str(not_a_folder)])
    assert_error(code, data, argv)
    code, data = run_cli(capsys, [*argv, "--json", "--no-such-option"])
    assert assert_error(code, data, argv)["kind"] == "usage"


def test_every_json_command_works_or_refuses_in_json(capsys, settings, small_folder):
    home = str(settings.home)
    seen = set()

    def ok(*argv):
        seen.add(next(w for w in COMMANDS if list(w) == list(argv[:len(w)])))
        code, data = run_cli(capsys, [*argv, "--json", "--home", home])
        assert code == 0 and not (isinstance(data, dict) and data.get("error")), (argv, data)
        return data

    def refused(*argv):
        seen.add(next(w for w in COMMANDS if list(w) == list(argv[:len(w)])))
        code, data = run_cli(capsys, [*argv, "--json", "--home", home])
        return assert_error(code, data, argv)

    assert ok("jobs") == []
    assert ok("register", str(small_folder), "--name", "Small CXR")["status"] == "registered"
    built = ok("build", "segment the liver on MRI", "--yes")
    assert built["status"] == "no_dataset"
    jobs = ok("jobs")
    assert [j["id"] for j in jobs] == [built["job_id"]] and jobs[0]["status"] == "no_dataset"
    assert ok("show", built["job_id"])["id"] == built["job_id"]
    assert "or an interrupted one" in refused("resume", built["job_id"])["error"]
    assert "error" in refused("show", "no-such-job")
    refused("evaluate", "latest", "--dataset", "Small CXR")
    assert "runs" in refused("bench", "--runs", "0")["error"]
    assert [r["status"] for r in ok("demo", "--basic")] == ["registered"]
    assert ok("store", "check")["ok"] is True
    backup = ok("store", "backup")["backup"]
    assert ok("store", "restore", backup)["restored_from"] == backup
    assert seen == set(COMMANDS), f"not exercised: {set(COMMANDS) - seen}"


def test_jobs_without_json_is_a_table_and_with_json_is_json(capsys, settings, store):
    store.insert_job({"id": "j1", "request": "classify things", "status": "succeeded",
                      "created_at": 1.0, "dataset": "D"})
    assert main(["jobs"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("j1  ") and "succeeded" in text
    code, data = run_cli(capsys, ["jobs", "--json"])
    assert code == 0 and data[0]["id"] == "j1" and data[0]["status"] == "succeeded"


def test_a_process_with_a_bad_argument_prints_json_and_no_traceback(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "crew", "jobs", "--limit", "many", "--json",
                           "--home", str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--limit" in json.loads(proc.stdout)["error"]
