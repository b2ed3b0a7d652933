"""Report-generation evaluator: BLEU-1..4 (corpus level, NLTK ``corpus_bleu`` with smoothing
method 1) and ROUGE-L (F-measure, Google's ``rouge_score``, mean over reports), against a
baseline that always answers the most common training report, with 95% bootstrap CIs.

The reference is ``findings + " " + impression`` from ``test.json`` (matched by ``image_path``;
every test item needs a prediction). Section headings ("FINDINGS:", "IMPRESSION:") are removed
from both sides, so a model earns nothing for writing them. Both metrics see the same words:
lower case, runs of letters and digits (``rouge_score``'s own tokenisation).
"""
from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import numpy as np
from nltk.translate.bleu_score import SmoothingFunction, corpus_bleu
from rouge_score import rouge_scorer

from core.evaluation.common import EvaluationError, bootstrap_ci, file_sha256

_HEADINGS = re.compile(r"\b(findings|impression)\s*:", re.IGNORECASE)
_BLEU_WEIGHTS = [(1.0,), (0.5, 0.5), (1 / 3, 1 / 3, 1 / 3), (0.25, 0.25, 0.25, 0.25)]
_SMOOTH = SmoothingFunction().method1


def clean(text: str) -> str:
    """Drop section headings and collapse whitespace."""
    return " ".join(_HEADINGS.sub(" ", text or "").split())


def tokens(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", clean(text).lower())


def reference_text(item: dict) -> str:
    return clean(f"{item.get('findings') or ''} {item.get('impression') or ''}")


def image_key(image_path) -> str:
    return image_path if isinstance(image_path, str) else json.dumps(image_path)


def bleu(references: list[list[str]], hypotheses: list[list[str]]) -> dict[str, float]:
    """Corpus BLEU-1..4 (one reference per report)."""
    if not any(hypotheses):
        return {f"bleu{n}": 0.0 for n in range(1, 5)}
    scores = corpus_bleu([[r] for r in references], hypotheses, weights=_BLEU_WEIGHTS,
                         smoothing_function=_SMOOTH)
    return {f"bleu{n}": float(s) for n, s in enumerate(scores, start=1)}


def rouge_l(references: list[str], hypotheses: list[str]) -> np.ndarray:
    """Per-report ROUGE-L F-measure."""
    scorer = rouge_scorer.RougeScorer(["rougeL"])
    return np.array([scorer.score(r, h)["rougeL"].fmeasure
                     for r, h in zip(references, hypotheses)], dtype=np.float64)


def most_common_report(train: list[dict]) -> tuple[str, int]:
    """The training report seen most often (first seen wins a tie) and its count."""
    counts = Counter(reference_text(item) for item in train)
    if not counts:
        return "", 0
    return counts.most_common(1)[0]


def _load(datapath: Path, predictions_path: Path) -> tuple[list, list, dict]:
    try:
        test = json.loads((datapath / "test.json").read_text())
        train_path = datapath / "train.json"
        train = json.loads(train_path.read_text()) if train_path.exists() else []
    except (OSError, json.JSONDecodeError) as exc:
        raise EvaluationError(f"cannot read the index in {datapath}: {exc}") from exc
    if not isinstance(test, list) or not test:
        raise EvaluationError("test.json must be a non-empty list of "
                              "{image_path, findings, impression}")
    try:
        raw = json.loads(Path(predictions_path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise EvaluationError(f"cannot read predictions {predictions_path}: {exc}") from exc
    if not isinstance(raw, list):
        raise EvaluationError("predictions must be a list of {image_path, generated}")
    predictions = {}
    for row in raw:
        if not isinstance(row, dict) or "image_path" not in row \
                or not isinstance(row.get("generated"), str):
            raise EvaluationError(f"malformed prediction {str(row)[:200]}: need image_path and "
                                  "generated text")
        predictions[image_key(row["image_path"])] = row["generated"]
    missing = [image_key(it["image_path"]) for it in test
               if image_key(it["image_path"]) not in predictions]
    if missing:
        raise EvaluationError(f"{len(missing)} of {len(test)} test images have no prediction, "
                              f"e.g. {missing[0]}")
    return test, train, predictions


def evaluate_report_generation(datapath: str | Path, predictions_path: str | Path,
                               n_boot: int = 500, n_samples: int = 5) -> dict:
    """Score predictions ``[{image_path, generated}]`` against ``test.json``."""
    datapath = Path(datapath)
    test, train, predictions = _load(datapath, Path(predictions_path))
    keys = [image_key(it["image_path"]) for it in test]
    refs = [reference_text(it) for it in test]
    hyps = [clean(predictions[k]) for k in keys]
    ref_tok, hyp_tok = [tokens(r) for r in refs], [tokens(h) for h in hyps]
    rouge = rouge_l(refs, hyps)
    baseline, baseline_count = most_common_report(train)
    base_rouge = rouge_l(refs, [baseline] * len(refs))
    metrics = {**bleu(ref_tok, hyp_tok), "rouge_l": float(rouge.mean()),
               "baseline_rouge_l": float(base_rouge.mean())}

    def resample(idx: np.ndarray) -> dict:
        out = bleu([ref_tok[i] for i in idx], [hyp_tok[i] for i in idx])
        out.update(rouge_l=float(rouge[idx].mean()), baseline_rouge_l=float(base_rouge[idx].mean()),
                   rouge_l_gain=float((rouge[idx] - base_rouge[idx]).mean()))
        return out

    ci = bootstrap_ci(len(keys), resample, n_boot=n_boot)
    samples = [{"image_path": test[i]["image_path"], "reference": refs[i],
                "generated": predictions[keys[i]]} for i in range(min(n_samples, len(test)))]
    return {
        "task": "report_generation", "metrics": metrics, "ci95": ci, "num_test": len(test),
        "baseline": {"report": baseline, "train_count": baseline_count,
                     "num_train": len(train), "bleu4": bleu(ref_tok, [tokens(baseline)]
                                                              * len(refs))["bleu4"]},
        "exact_match": float(np.mean([h == r for h, r in zip(hyp_tok, ref_tok)])),
        "samples": samples, "evaluator": "core.evaluation.report_generation",
        "test_index_sha256": file_sha256(datapath / "test.json"),
    }
