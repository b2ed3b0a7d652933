"""``python -m crew bench``: an M3Bench-style benchmark through the real crew.

For the chosen suite (``m3bench-lite``: 14 synthetic stand-ins for the paper's datasets and 12
ordinary public-dataset layouts; ``paper`` or ``layout-families`` for either part),
generate the datasets when missing, register all of them (the Task Manager chooses among every
card, as in the paper), then for each selected dataset and run create a job from the dataset's
request, approve the plan automatically and run the four roles. A run succeeds when the job
succeeds on the intended dataset with the intended template and the system evaluator's metric
clears the dataset's floor. Per role, actions (tool calls), seconds and LLM tokens are read from
the store's ``job_events``. The table is printed and the same results are written as JSON after
every run, so an interrupted bench keeps what it measured. A dataset that fails to generate,
register, pass a gate or train is recorded with its error and the bench goes on.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from bench.m3bench_lite.suite import SUITES
from core.config.settings import Settings, get_settings
from core.datasets.datacards import write_json_atomic
from core.jobs.launcher import run_to_end
from core.jobs.lifecycle import create_job
from core.jobs.workspace import JobWorkspace
from core.store.db import Store, open_store
from crew.stages import STAGES

ROLES = [s.role for s in STAGES]
ROLE_SHORT = {"Task Manager": "TM", "Data Engineer": "DE", "Module Architect": "MA",
              "Model Trainer": "MT"}


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def role_stats(store: Store, job_id: str) -> dict[str, dict]:
    """Actions (tool calls), seconds (the stage's own clock), LLM tokens and cost (USD, from
    litellm's price map; 0 for local or unknown models) and autopilot fallbacks per role."""
    events = store.events(job_id)
    stats = {}
    for role in ROLES:
        mine = [e for e in events if e["role"] == role]
        ends = [e for e in mine if e["kind"] == "stage" and e["tool"] == "end"]
        stats[role] = {"actions": sum(1 for e in mine if e["kind"] == "tool"),
                       "seconds": round(sum(e["seconds"] for e in ends), 2),
                       "tokens": int(sum(e["tokens"] for e in mine if e["kind"] == "llm")),
                       "cost_usd": round(sum(e.get("cost") or 0.0 for e in mine
                                             if e["kind"] == "llm"), 6),
                       "fallback": int(any(e["kind"] == "fallback" for e in mine))}
    return stats


def run_once(settings: Settings, store: Store, dataset, run: int, llm: str) -> dict:
    """One job for one dataset; the verdict and its reasons, metrics and per-role costs."""
    started = time.time()
    record = {"run": run, "job_id": None, "status": "failed", "success": False,
              "dataset_chosen": None, "template": None, "metric": dataset.floor.metric,
              "value": None, "metrics": {}, "error": None, "roles": {}, "seconds": 0.0,
              "interrupted": False}
    try:
        job_id = create_job(settings, store, dataset.request, llm, auto_approve=True)
        record["job_id"] = job_id
        result, record["interrupted"] = run_to_end(settings, store, job_id, actor="bench")
        plan_path = JobWorkspace(settings.jobs_dir / job_id).plan
        plan = json.loads(plan_path.read_text()) if plan_path.exists() else {}
        metrics = {k: v for k, v in (result.get("metrics") or {}).items()
                   if isinstance(v, (int, float))}
        record.update(status=result.get("status", "failed"), dataset_chosen=result.get("dataset"),
                      template=plan.get("template"), metrics=metrics,
                      value=metrics.get(dataset.floor.metric), error=result.get("error"))
        reasons = []
        if record["status"] != "succeeded":
            reasons.append(f"job {record['status']}")
        if record["dataset_chosen"] != dataset.name:
            reasons.append(f"Task Manager chose {record['dataset_chosen']!r}, not "
                           f"{dataset.name!r}")
        elif record["template"] != dataset.template:
            reasons.append(f"template {record['template']!r}, not {dataset.template!r}")
        if record["status"] == "succeeded" and not dataset.floor.passed(metrics):
            reasons.append(f"{dataset.floor.metric} {record['value']} misses the floor "
                           f"{dataset.floor.text()}")
        record["success"] = not reasons
        if reasons and not record["error"]:
            record["error"] = "; ".join(reasons)
        elif reasons:
            record["error"] = "; ".join(reasons) + f" ({record['error']})"
        record["roles"] = role_stats(store, job_id)
    except Exception as exc:  # a crashed job is one failed run, never the end of the bench
        record["error"] = f"{type(exc).__name__}: {exc}"
        if record["job_id"]:
            record["roles"] = role_stats(store, record["job_id"])
    record["seconds"] = round(time.time() - started, 1)
    return record


def _mean(values: list[float]) -> float | None:
    values = [v for v in values if isinstance(v, (int, float)) and v == v]
    return round(sum(values) / len(values), 4) if values else None


def summarise(entry: dict) -> dict:
    """Per-dataset figures over its runs (paper style: success rate, mean costs per role)."""
    runs = entry["runs"]
    entry["successes"] = sum(r["success"] for r in runs)
    entry["success_rate"] = round(entry["successes"] / entry["runs_planned"], 4) \
        if entry["runs_planned"] else 0.0
    entry["metric_mean"] = _mean([r["value"] for r in runs])
    entry["roles"] = {role: {key: _mean([r["roles"].get(role, {}).get(key) for r in runs
                                         if r["roles"]])
                             for key in ("actions", "seconds", "tokens", "cost_usd", "fallback")}
                      for role in ROLES}
    entry["seconds_mean"] = _mean([r["seconds"] for r in runs])
    return entry


def overall(results: dict) -> dict:
    planned = sum(e["runs_planned"] for e in results["datasets"])
    successes = sum(e["successes"] for e in results["datasets"])
    return {"runs": planned, "runs_done": sum(len(e["runs"]) for e in results["datasets"]),
            "successes": successes,
            "success_rate": round(successes / planned, 4) if planned else 0.0,
            "wall_seconds": round(time.time() - results["started_at"], 1)}


def _cost(stats: dict | None) -> str:
    if not stats or stats.get("actions") is None:
        return "-"
    text = f"{stats['actions']:g}a {stats['seconds']:.0f}s {stats['tokens']:.0f}t"
    if stats.get("cost_usd"):
        text += f" ${stats['cost_usd']:.3f}"
    if stats.get("fallback"):
        text += f" fb{stats['fallback']:.0%}"  # share of runs the role fell back to autopilot
    return text


def format_table(results: dict) -> str:
    """The paper-style table: success over runs, the metric against its floor, and per role
    actions (a), seconds (s), tokens (t), cost ($) and the share of runs that fell back to
    autopilot (fb), averaged over the runs."""
    width = max([22] + [len(e["name"]) + 2 for e in results["datasets"]])
    head = (f"{'dataset':<{width}}{'task':<18}{'success':>8}  {'metric (floor)':<46}"
            + "".join(f"{ROLE_SHORT[r]:<17}" for r in ROLES) + f"{'wall':>7}")
    lines = [head, "-" * len(head)]
    for e in results["datasets"]:
        value = e.get("metric_mean")
        metric = (f"{e['metric']} {value:.3f}" if value is not None else f"{e['metric']} -") + \
            f" ({e['floor']})"
        lines.append(f"{e['name']:<{width}}{e['task']:<18}"
                     f"{e['successes']:>4}/{e['runs_planned']:<3}  {metric:<46}"
                     + "".join(f"{_cost(e['roles'].get(r)):<17}" for r in ROLES)
                     + f"{(e.get('seconds_mean') or 0):>6.0f}s")
        for r in e["runs"]:
            if not r["success"] and r.get("error"):
                lines.append(f"    run {r['run']}: {r['error'][:150]}")
        if e.get("error"):
            lines.append(f"    not run: {e['error'][:150]}")
    o = results["overall"]
    lines.append("-" * len(head))
    lines.append(f"overall success {o['successes']}/{o['runs']} = {100 * o['success_rate']:.2f}% "
                 f"({results['llm']}), wall time {o['wall_seconds'] / 60:.1f} min")
    return "\n".join(lines)


def _register_all(settings: Settings, store: Store, data_dir: Path, datasets: list) -> dict:
    """Generate (when missing) and register each dataset; name -> error text or None."""
    from core.datasets.registration import register_dataset

    errors: dict[str, str | None] = {}
    for dataset in datasets:
        folder = data_dir / dataset.folder
        try:
            dataset.build(folder)
        except Exception as exc:  # noqa: BLE001  (recorded, the bench goes on)
            errors[dataset.name] = f"generation failed: {type(exc).__name__}: {exc}"
            continue
        try:
            trust = {"allow_pickle": True} if dataset.allow_pickle else {}
            result = register_dataset(settings, store, str(folder), dataset.name,
                                      dataset.description, source="demo", overwrite=True,
                                      **trust)
        except Exception as exc:  # noqa: BLE001  (a crashing recogniser is a failed dataset)
            errors[dataset.name] = f"registration crashed: {type(exc).__name__}: {exc}"
            continue
        if result["status"] != "registered":
            errors[dataset.name] = "registration: " + "; ".join(result["errors"])
        elif result["task"] not in _accepted_tasks(dataset.task):
            errors[dataset.name] = (f"registered as {result['task']!r} but the dataset is "
                                    f"{dataset.task!r}: the layout was not recognised")
        else:
            errors[dataset.name] = None
        _log(f"{'registered' if errors[dataset.name] is None else 'NOT usable':<11} "
             f"{dataset.name}" + (f": {errors[dataset.name][:160]}" if errors[dataset.name]
                                  else ""))
    return errors


def _accepted_tasks(task: str) -> set[str]:
    return {"segmentation", "anomaly_detection"} if task in ("segmentation",
                                                           "anomaly_detection") else {task}


def _unregister(settings: Settings, store: Store, datasets: list) -> None:
    """Drop the cards of datasets that are not usable: a stale card from an earlier bench, or
    one registered under the wrong task, would be chosen for other datasets' requests."""
    from core.datasets.catalog import sync_store

    for dataset in datasets:
        card = settings.datacards_dir / f"{dataset.datacard('').slug()}.json"
        card.unlink(missing_ok=True)
        card.with_suffix(".validation.json").unlink(missing_ok=True)
    sync_store(settings, store)


def run_bench(settings: Settings, suite: str = "m3bench-lite", llm: str = "autopilot",
              runs: int = 1, only: str | None = None, data_dir: str | Path | None = None,
              out: str | Path | None = None) -> dict:
    from bench.m3bench_lite import datasets_of, select

    if suite not in SUITES:
        raise ValueError(f"unknown suite {suite!r}; available: {', '.join(SUITES)}")
    if runs < 1:
        raise ValueError("--runs must be at least 1")
    chosen = select(only, suite)
    suite_datasets = datasets_of(suite)
    data_dir = Path(data_dir).expanduser().resolve() if data_dir else \
        settings.demo_dir / suite.replace("-", "_")
    out_path = Path(out).expanduser().resolve() if out else \
        settings.home / "bench" / f"{suite}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    store = open_store(settings.store_path)
    results = {"suite": suite, "llm": llm, "runs_per_dataset": runs, "home": str(settings.home),
               "data_dir": str(data_dir), "started_at": time.time(), "datasets": [],
               "overall": {}, "results_path": str(out_path)}
    _log(f"{suite}: generating and registering {len(suite_datasets)} datasets in {data_dir}")
    errors = _register_all(settings, store, data_dir, suite_datasets)
    _unregister(settings, store, [d for d in suite_datasets if errors.get(d.name)])
    for dataset in chosen:
        entry = {"name": dataset.name, "paper_name": dataset.paper_name, "task": dataset.task,
                 "template": dataset.template, "request": dataset.request,
                 "metric": dataset.floor.metric, "floor": dataset.floor.text(),
                 "runs_planned": runs, "runs": [], "error": errors.get(dataset.name)}
        results["datasets"].append(entry)
    for entry, dataset in zip(results["datasets"], chosen):
        if entry["error"] is not None:
            continue
        if results.get("interrupted"):
            entry["error"] = "the bench was interrupted before this dataset"
            continue
        for run in range(1, runs + 1):
            _log(f"--- {dataset.name} run {run}/{runs}: {dataset.request!r}")
            record = run_once(settings, store, dataset, run, llm)
            entry["runs"].append(record)
            _log(f"    {'SUCCESS' if record['success'] else 'failure'} "
                 f"{dataset.floor.metric}={record['value']} in {record['seconds']:.0f}s"
                 + (f": {record['error'][:200]}" if record["error"] else ""))
            _write(results, out_path)
            if record["interrupted"]:
                _log("bench interrupted; the results so far are kept")
                results["interrupted"] = True
                break
    _write(results, out_path)
    return results


def _write(results: dict, out_path: Path) -> None:
    for entry in results["datasets"]:
        summarise(entry)
    results["overall"] = overall(results)
    write_json_atomic(out_path, results)


def main(args) -> int:
    """Entry point of ``python -m crew bench`` (arguments parsed by crew.cli)."""
    settings = get_settings(args.home, args.llm)
    try:
        results = run_bench(settings, args.suite, settings.llm, args.runs, args.only, args.data,
                            args.out)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(results, indent=2, default=str))
    else:
        print(format_table(results))
        print(f"results: {results['results_path']}")
    return 130 if results.get("interrupted") else 0
