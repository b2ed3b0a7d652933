"""Command line: register datasets, build models, list and show jobs.

    python -m crew register PATH --name NAME [--description TEXT] [--allow-pickle]
                                 [--interpretation N]
                            [--home DIR] [--json]
    python -m crew build "REQUEST" [--home DIR] [--llm autopilot|MODEL] [--yes] [--json]
                         [--epochs N] [--time-budget MIN] [--operating-point RULE]
    python -m crew jobs [--home DIR]
    python -m crew show JOB [--home DIR]
    python -m crew evaluate MODEL --dataset NAME [--home DIR] [--json]
                            score a model (id, name or "latest") on another registered dataset
    python -m crew demo [--basic] [--home DIR] build and register the demo datasets
    python -m crew bench [--suite m3bench-lite|paper|layout-families] [--llm autopilot|MODEL] [--runs N]
                         [--only NAME,...] [--out FILE] [--data DIR] [--home DIR]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from core.config.settings import get_settings
from core.jobs.launcher import run_to_end
from core.jobs.lifecycle import JobError, create_job, set_approval
from core.jobs.workspace import JobWorkspace
from core.store.db import TERMINAL_STATUSES, open_store


def _print(data: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(data, indent=2, default=str))
        return
    for key, value in data.items():
        if value not in (None, [], {}, ""):
            print(f"{key}: "
                  f"{json.dumps(value, default=str) if isinstance(value, (dict, list)) else value}")


def cmd_register(args) -> int:
    from core.datasets.registration import register_dataset
    settings = get_settings(args.home)
    result = register_dataset(settings, open_store(settings.store_path), args.path, args.name,
                              args.description or "", allow_pickle=args.allow_pickle,
                              interpretation=args.interpretation)
    if args.json:
        _print(result, True)
    else:
        from core.datasets.registration import format_registration
        print(format_registration(result))
    return 0 if result["status"] == "registered" else 1


def cmd_demo(args) -> int:
    from crew.demo import ensure_all_demos, ensure_demo
    settings = get_settings(args.home)
    results = [ensure_demo(settings)] if args.basic else ensure_all_demos(settings)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for r in results:
            print(f"{r['status']:<11} {r['task'] or '-':<18} {r['name']}"
                  + (f"  errors: {r['errors']}" if r["errors"] else ""))
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


def cmd_build(args) -> int:
    if not args.yes and not sys.stdin.isatty():
        print("error: the plan needs approval and there is no terminal to ask; pass --yes to "
              "approve it without asking", file=sys.stderr)
        return 2
    settings = get_settings(args.home, args.llm)
    store = open_store(settings.store_path)
    # plan edits given on the command line are applied at approval, as the user's own edits
    edits = {key: value for key, value in (("epochs", args.epochs),
                                           ("time_budget_min", args.time_budget),
                                           ("operating_point", args.operating_point))
             if value is not None}
    try:  # with edits the plan waits for approval, so they can be applied to it
        job_id = create_job(settings, store, args.request, settings.llm,
                            auto_approve=args.yes and not edits)
    except JobError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
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
    result, _ = run_to_end(settings, store, job_id, on_tick=tick)  # the app's worker process
    _progress(store, job_id, state["last"])
    _print(result, args.json)
    return 0 if result.get("status") in ("succeeded", "no_dataset") else 1


def cmd_jobs(args) -> int:
    store = open_store(get_settings(args.home).store_path)
    for job in store.jobs(args.limit):
        created = time.strftime("%Y-%m-%d %H:%M", time.localtime(job["created_at"]))
        print(f"{job['id']}  {created}  {job['status']:<17} {job['dataset'] or '-':<30} "
              f"{job['request'][:60]}")
    return 0


def cmd_show(args) -> int:
    store = open_store(get_settings(args.home).store_path)
    job = store.job(args.job_id)
    if job is None:
        print(f"error: no job {args.job_id}; `python -m crew jobs` lists them", file=sys.stderr)
        return 1
    job["result"] = json.loads(job["result"]) if job.get("result") else None
    if args.events:
        job["events"] = store.events(args.job_id)
    _print(job, True)
    return 0 if job["status"] not in TERMINAL_STATUSES - {"succeeded", "no_dataset"} else 1


def cmd_evaluate(args) -> int:
    from core.external_validation.compat import ExternalValidationError
    from core.external_validation.views import side_by_side, text_table
    from crew.external import evaluate_on_dataset
    settings = get_settings(args.home)
    try:
        report = evaluate_on_dataset(settings, open_store(settings.store_path), args.model,
                                     args.dataset, actor="cli",
                                     request=f"evaluate {args.model} --dataset {args.dataset}")
    except ExternalValidationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        _print({**report, "side_by_side": side_by_side(report)}, True)
    else:
        print(text_table(report))
    return 0


def cmd_bench(args) -> int:
    from crew.bench import main
    return main(args)


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--home", help="M3Builder home folder (default: $M3B_HOME or ~/.m3builder)")
    common.add_argument("--json", action="store_true", help="print JSON")
    parser = argparse.ArgumentParser(prog="python -m crew", description=__doc__,
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
    p.set_defaults(func=cmd_build)
    p = sub.add_parser("jobs", parents=[common], help="list jobs")
    p.add_argument("--limit", type=int, default=30)
    p.set_defaults(func=cmd_jobs)
    p = sub.add_parser("show", parents=[common], help="describe one job")
    p.add_argument("job_id")
    p.add_argument("--events", action="store_true", help="include every step")
    p.set_defaults(func=cmd_show)
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
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)
