"""Command line: register datasets, build models, list and show jobs.

    python -m crew register PATH --name NAME [--description TEXT] [--allow-pickle]
                                 [--interpretation N] [--recipe FILE]
                            [--home DIR] [--json]
    python -m crew build "REQUEST" [--home DIR] [--llm autopilot|MODEL] [--yes] [--json]
                         [--epochs N] [--time-budget MIN] [--operating-point RULE]
                         [--interpretation N]
                            a folder the request names ("... from /data/cxr") is registered
                            (or its datacard found) and the plan uses that dataset
    python -m crew jobs [--limit N] [--home DIR] [--json]
    python -m crew show JOB [--events] [--home DIR]
    python -m crew resume JOB [--yes] [--home DIR] [--json]
                            go on with a stopped, failed or interrupted job: training from its
                            newest checkpoint, else from the stage that did not finish
    python -m crew evaluate MODEL --dataset NAME [--home DIR] [--json]
                            score a model (id, name or "latest") on another registered dataset
    python -m crew demo [--basic] [--home DIR] build and register the demo datasets
    python -m crew bench [--suite m3bench-lite|paper|layout-families] [--llm autopilot|MODEL] [--runs N]
                         [--only NAME,...] [--out FILE] [--data DIR] [--home DIR]
    python -m crew store check|backup|restore [BACKUP] [--home DIR] [--json]
                            the store's integrity and its rolling backups

Every command that takes --json prints exactly one JSON document on stdout, an error as
{"error": ..., "kind": ...} with a non-zero exit status (crew/cli_output.py).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from core.jobs.launcher import run_to_end
from core.jobs.lifecycle import JobError, prepare_resume, set_approval
from core.jobs.workspace import JobWorkspace
from core.planning.request_folder import folder_note, start_request
from core.store.db import TERMINAL_STATUSES
from core.store.home import load_settings, open_home
from crew.cli_output import CLIError, JsonArgumentParser, emit, run
from crew.cli_store import add_store_parser


def _settings(args, llm: str | None = None):
    try:
        return load_settings(args.home, llm)
    except ValueError as exc:  # a malformed setting in the environment, named by the message
        raise CLIError(str(exc)) from None


def _open(args, llm: str | None = None):
    try:
        return open_home(args.home, llm)
    except ValueError as exc:
        raise CLIError(str(exc)) from None


def cmd_register(args) -> int:
    from core.datasets.registration import format_registration, register_dataset
    recipe = None
    if args.recipe:
        from core.datasets.records.recipe import RecipeError, load_recipe
        try:
            recipe = load_recipe(args.recipe).to_json()
        except RecipeError as exc:
            raise CLIError(str(exc)) from None
    settings, store = _open(args)
    result = register_dataset(settings, store, args.path, args.name,
                              args.description or "", allow_pickle=args.allow_pickle,
                              interpretation=args.interpretation, recipe=recipe)
    emit(args, result, None if args.json else format_registration(result))
    return 0 if result["status"] == "registered" else 1


def cmd_demo(args) -> int:
    from crew.demo import ensure_all_demos, ensure_demo
    settings, _store = _open(args)
    results = [ensure_demo(settings)] if args.basic else ensure_all_demos(settings)
    emit(args, results, "\n".join(f"{r['status']:<11} {r['task'] or '-':<18} {r['name']}"
                                   + (f"  errors: {r['errors']}" if r["errors"] else "")
                                   for r in results))
    return 0 if all(r["status"] == "registered" for r in results) else 1


def _progress(store, job_id: str, last_id: int) -> int:
    for event in store.events(job_id, last_id):
        last_id = event["id"]
        if event["kind"] in ("tool", "gate", "stage") and not (event["kind"] == "stage"
                                                               and event["tool"] == "start"):
            mark = "ok " if event["ok"] else "ERR"
            print(f"[{event['role']:<16}] {mark} {event['kind']:<5} {event['tool']:<20} "
                  f"{event['result'][:110]} ({event['seconds']:.1f}s)", file=sys.stderr)
        elif event["kind"] == "stage":
            print(f"[{event['role']:<16}] --- starts", file=sys.stderr)
    return last_id


def _approve(settings, store, job_id: str, edits: dict, actor: str) -> None:
    """Approve the plan; with edits (--epochs, --time-budget, --operating-point) through the plan-edit machinery,
    as the Chat page's edit form does: checked, written, re-gated, recorded, then approved. An
    edit the plan refuses cancels the job with the reasons."""
    if not edits:
        set_approval(store, job_id, "approved", actor=actor)
        return
    from core.planning.plan_edits import PlanEditError, edit_plan
    try:
        result = edit_plan(settings, store, job_id, edits, actor=actor)
    except PlanEditError as exc:
        print("error: the plan edit was refused: " + "; ".join(exc.errors), file=sys.stderr)
        set_approval(store, job_id, "cancelled", actor=actor)
        return
    print(f"plan edited and approved: {result.summary()}", file=sys.stderr)


def _ask_approval(settings, store, job_id: str, edits: dict) -> None:
    job = store.job(job_id)
    plan = JobWorkspace(Path(job["workspace"])).read_plan()
    print("\nPlan:\n" + json.dumps({k: plan.get(k) for k in ("dataset", "task", "model", "metric",
                                                             "split", "time_budget_s", "reasons")},
                                   indent=2), file=sys.stderr)
    if edits:
        print(f"with your edits: {json.dumps(edits)}", file=sys.stderr)
    answer = input("Approve this plan and start training? [y/N] ").strip().lower()
    if answer in ("y", "yes"):
        _approve(settings, store, job_id, edits, actor="user")
    else:
        set_approval(store, job_id, "cancelled")


def _follow(args, settings, store, job_id: str, edits: dict, resume: bool = False) -> int:
    """Run the job's worker to its end, printing progress on stderr and the result."""
    state = {"last": 0, "asked": False}

    def tick(job: dict) -> None:
        state["last"] = _progress(store, job_id, state["last"])
        if not state["asked"] and job.get("status") == "awaiting_approval":
            state["asked"] = True
            if args.yes:
                _approve(settings, store, job_id, edits, actor="user (--yes)")
            else:
                _ask_approval(settings, store, job_id, edits)

    print("(Ctrl-C stops the job; training keeps its best model so far)", file=sys.stderr)
    result, _ = run_to_end(settings, store, job_id, on_tick=tick, resume=resume)
    _progress(store, job_id, state["last"])
    emit(args, result)
    return 0 if result.get("status") in ("succeeded", "no_dataset") else 1


def cmd_build(args) -> int:
    if not args.yes and not sys.stdin.isatty():
        raise CLIError("the plan needs approval and there is no terminal to ask; pass --yes to "
                       "approve it without asking")
    settings, store = _open(args, args.llm)
    # plan edits given on the command line are applied at approval, as the user's own edits
    edits = {key: value for key, value in (("epochs", args.epochs),
                                           ("time_budget_min", args.time_budget),
                                           ("operating_point", args.operating_point))
             if value is not None}
    interpretation = args.interpretation
    while True:  # a folder named in the request is registered first (or its card found)
        try:  # with edits the plan waits for approval, so they can be applied to it
            started = start_request(settings, store, args.request, settings.llm,
                                    auto_approve=args.yes and not edits,
                                    interpretation=interpretation)
        except JobError as exc:
            raise CLIError(str(exc)) from None
        if started["status"] == "created":
            break
        interpretation = _choose_reading(args, started["folder"])
        if interpretation is None:
            return 1
    note = folder_note(started["folder"])
    if note:
        print(note[:1].upper() + note[1:] + ".", file=sys.stderr)
    return _follow(args, settings, store, started["job_id"], edits)


def _readings_text(folder: dict) -> str:
    lines = [f"The folder {folder['path']} can be read in more than one way (best first):"]
    for item in folder.get("interpretations", []):
        if item.get("refused"):
            lines.append(f"  {item['number']}. {item['reader']}: not usable: {item['refused']}")
            continue
        lines.append(f"  {item['number']}. {item['task']} from {item['source']}: "
                     f"{item['num_samples']} samples, classes "
                     f"{', '.join(item['classes']) or '(free text / masks)'}, covers "
                     f"{item['coverage']:.0%} of the images, patients by {item['patient_key']}")
        lines += [f"       e.g. {row}" for row in item.get("examples", [])]
    return "\n".join(lines)


def _choose_reading(args, folder: dict) -> int | None:
    """The folder the request names can be read more than one way: list the readings (stderr)
    and ask which (a terminal), else say how to choose (--interpretation N) and stop."""
    listing = _readings_text(folder)
    usable = [r["number"] for r in folder.get("interpretations", []) if not r.get("refused")]
    if args.json or not sys.stdin.isatty():
        if args.json:
            emit(args, {"error": folder["message"] + "; run again with --interpretation N",
                        "kind": "needs_choice", "path": folder["path"],
                        "interpretations": folder.get("interpretations", [])})
        else:
            print(listing, file=sys.stderr)
            print(f"error: {folder['message']}; run the command again with --interpretation N "
                  "(one of the numbers above)", file=sys.stderr)
        return None
    print(listing, file=sys.stderr)
    answer = input(f"Which reading of {folder['path']}? "
                   f"[{', '.join(map(str, usable))}; Enter cancels] ").strip()
    if answer.isdigit() and int(answer) in usable:
        return int(answer)
    print("no reading chosen: nothing was registered and no job was created", file=sys.stderr)
    return None


def cmd_resume(args) -> int:
    settings, store = _open(args)
    job = store.job(args.job_id) or {}
    if (job and job.get("approval") != "approved" and not job.get("auto_approve")
            and not args.yes and not sys.stdin.isatty()):
        raise CLIError(f"job {args.job_id} stopped before its plan was approved, so resuming "
                       "asks for approval and there is no terminal to ask; pass --yes to "
                       "approve it without asking", kind="needs_approval")
    try:
        prepare_resume(store, args.job_id, actor="cli")
    except JobError as exc:
        raise CLIError(str(exc), code=1, kind="not_resumable") from None
    return _follow(args, settings, store, args.job_id, {}, resume=True)


def _job_line(job: dict) -> str:
    created = time.strftime("%Y-%m-%d %H:%M", time.localtime(job["created_at"] or 0))
    return (f"{job['id']}  {created}  {job['status']:<17} {job['dataset'] or '-':<30} "
            f"{(job['request'] or '')[:60]}")


def cmd_jobs(args) -> int:
    _settings_, store = _open(args)
    jobs = store.jobs(args.limit)
    if args.json:
        keys = ("id", "status", "stage", "dataset", "task", "request", "llm", "created_at",
                "started_at", "finished_at", "pid", "error", "workspace")
        emit(args, [{k: job.get(k) for k in keys} for job in jobs])
    else:
        emit(args, None, "\n".join(_job_line(job) for job in jobs) or "no jobs yet")
    return 0


def cmd_show(args) -> int:
    _settings_, store = _open(args)
    job = store.job(args.job_id)
    if job is None:
        raise CLIError(f"no job {args.job_id}; `python -m crew jobs` lists them", code=1,
                       kind="not_found")
    job["result"] = json.loads(job["result"]) if job.get("result") else None
    if args.events:
        job["events"] = store.events(args.job_id)
    emit(args, job, always_json=True)
    return 0 if job["status"] not in TERMINAL_STATUSES - {"succeeded", "no_dataset"} else 1


def cmd_evaluate(args) -> int:
    from core.external_validation.compat import ExternalValidationError
    from core.external_validation.views import side_by_side, text_table
    from crew.external import evaluate_on_dataset
    settings, store = _open(args)
    try:
        report = evaluate_on_dataset(settings, store, args.model,
                                     args.dataset, actor="cli",
                                     request=f"evaluate {args.model} --dataset {args.dataset}")
    except ExternalValidationError as exc:
        raise CLIError(str(exc)) from None
    emit(args, {**report, "side_by_side": side_by_side(report)} if args.json else report,
         None if args.json else text_table(report))
    return 0


def cmd_bench(args) -> int:
    from crew.bench import format_table, run_bench
    settings = _settings(args, args.llm)
    try:
        results = run_bench(settings, args.suite, settings.llm, args.runs, args.only, args.data,
                            args.out)
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    emit(args, results, None if args.json else
         f"{format_table(results)}\nresults: {results['results_path']}")
    return 130 if results.get("interrupted") else 0


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--home", help="M3Builder home folder (default: $M3B_HOME or ~/.m3builder)")
    common.add_argument("--json", action="store_true", help="print JSON")
    parser = JsonArgumentParser(prog="python -m crew", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("register", parents=[common], help="register a dataset folder")
    p.add_argument("path")
    p.add_argument("--name", required=True)
    p.add_argument("--description", default="")
    p.add_argument("--allow-pickle", action="store_true",
                   help="trust this local dataset's .pck/.pkl files: reading a pickle runs "
                        "code, so only for data you made or got from a source you trust")
    p.add_argument("--interpretation", type=int, default=None, metavar="N",
                   help="read the folder the N-th way listed when registration finds it can be "
                        "read in more than one way")
    p.add_argument("--recipe", default=None, metavar="FILE",
                   help="read the folder by this recipe (JSON: a target's 'recipe' as --json "
                        "prints it, edited: source, image_field, role, fields, values, "
                        "group_field, split_field)")
    p.set_defaults(func=cmd_register)
    p = sub.add_parser("build", parents=[common], help="build a model from a request")
    p.add_argument("request")
    p.add_argument("--llm", help="'autopilot' (default) or a model string, e.g. openai/gpt-4o")
    p.add_argument("--yes", action="store_true", help="approve the plan without asking")
    p.add_argument("--epochs", type=int, default=None, metavar="N",
                   help="edit the plan's epochs to N when approving it (a binding user edit)")
    p.add_argument("--operating-point", default=None, metavar="RULE",
                   help="diagnosis: how the decision threshold is chosen on validation, "
                        "'youden' (default) or e.g. '95%% sensitivity', '90%% specificity'")
    p.add_argument("--time-budget", type=float, default=None, metavar="MIN",
                   help="edit the plan's time budget to MIN minutes when approving it")
    p.add_argument("--interpretation", type=int, default=None, metavar="N",
                   help="when the request names a folder that can be read in more than one "
                        "way, register it read the N-th way listed")
    p.set_defaults(func=cmd_build)
    p = sub.add_parser("jobs", parents=[common], help="list jobs")
    p.add_argument("--limit", type=int, default=30)
    p.set_defaults(func=cmd_jobs)
    p = sub.add_parser("show", parents=[common], help="describe one job")
    p.add_argument("job_id")
    p.add_argument("--events", action="store_true", help="include every step")
    p.set_defaults(func=cmd_show)
    p = sub.add_parser("resume", parents=[common],
                       help="go on with a stopped, failed or interrupted job: training from "
                            "its newest checkpoint, else from the stage that did not finish")
    p.add_argument("job_id")
    p.add_argument("--yes", action="store_true",
                   help="approve the plan without asking, when the job stopped before its "
                        "plan was approved")
    p.set_defaults(func=cmd_resume)
    p = sub.add_parser("evaluate", parents=[common],
                       help="score a trained model on another registered dataset")
    p.add_argument("model", help='model id (its job id), model name, or "latest"')
    p.add_argument("--dataset", required=True, help="registered dataset name")
    p.set_defaults(func=cmd_evaluate)
    p = sub.add_parser("demo", parents=[common], help="build and register the demo datasets")
    p.add_argument("--basic", action="store_true",
                   help="only the 2D chest X-ray demo (fastest)")
    p.set_defaults(func=cmd_demo)
    p = sub.add_parser("bench", parents=[common],
                       help="run the M3Bench-lite benchmark through the crew")
    p.add_argument("--suite", default="m3bench-lite",
                   help="benchmark suite: m3bench-lite (all 26), paper (the paper's 14) or "
                        "layout-families (the 12 ordinary layouts)")
    p.add_argument("--llm", help="'autopilot' (default) or a model string, e.g. openai/gpt-4o")
    p.add_argument("--runs", type=int, default=1, help="runs per dataset (the paper uses 5)")
    p.add_argument("--only", help="comma-separated dataset names, e.g. ADNI,BTCV")
    p.add_argument("--out", help="results JSON (default <home>/bench/<suite>-<time>.json)")
    p.add_argument("--data", help="folder for the generated datasets "
                                  "(default <home>/demo/m3bench_lite)")
    p.set_defaults(func=cmd_bench)
    add_store_parser(sub, common)
    return parser


def main(argv: list[str] | None = None) -> int:
    return run(build_parser(), argv, lambda args: args.func(args))
