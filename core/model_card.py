"""Model card (markdown): data, split, metrics with CIs, intended use and limits."""
from __future__ import annotations

import json

from core import RESEARCH_ONLY


def _fmt(value: float | None) -> str:
    return "n/a" if value is None or value != value else f"{value:.3f}"


def render_model_card(plan: dict, report: dict, summary: dict, split: dict) -> str:
    m, ci = report["metrics"], report.get("ci95", {})
    rows = "\n".join(
        f"| {name} | {_fmt(m.get(name))} | "
        f"{_fmt(ci[name][0]) + ' – ' + _fmt(ci[name][1]) if ci.get(name) else 'n/a'} |"
        for name in ("auc", "accuracy", "f1_macro"))
    per_class = "\n".join(
        f"| {name} | {_fmt(v['sensitivity'])} | {_fmt(v['specificity'])} | {v['support']} |"
        for name, v in report.get("per_class", {}).items())
    counts = split.get("counts", {})
    return f"""# Model card: {plan['dataset']} — {plan['task']}

> **{RESEARCH_ONLY}**

## What it does
Classifies {plan.get('modality') or ''} {plan.get('anatomy') or ''} images into
{', '.join(plan.get('classes', []))}. Built by M3Builder from the request:
"{plan.get('request', '')}".

## Data
- Dataset: {plan['dataset']} (`{plan['dataset_path']}`)
- Split: {split.get('method')} by {split.get('grouping_key')}, seed {split.get('seed')};
  train {json.dumps(counts.get('train', {}))}, test {json.dumps(counts.get('test', {}))}
- {len(split.get('train_groups', []))} training and {len(split.get('test_groups', []))} test patients/groups; none on both sides.

## Model
- Network: {summary.get('network')} ({summary.get('num_parameters', 0):,} parameters), trained from scratch
  unless a local pretrained path was given; {summary.get('epochs_run')} epochs, {summary.get('device')},
  {summary.get('seconds', 0):.0f} s; stop reason: {summary.get('stop_reason')}.

## Test-set performance (system evaluator, {report['num_test']} images, 95% bootstrap CI)
| metric | value | 95% CI |
|---|---|---|
{rows}

| class | sensitivity | specificity | support |
|---|---|---|---|
{per_class}

## Intended use and limits
- Intended for research and method development only; not validated for clinical use.
- Performance is measured on a held-out split of one dataset; it says nothing about other
  scanners, hospitals or populations. Small test sets give wide confidence intervals.
- Do not use it to make or support decisions about individual patients.
"""
