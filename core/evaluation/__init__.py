"""The system's own evaluators: the test metrics a job reports come from here, never from a
template or an LLM. Each reads the ground truth from the job's index files and the template's
predictions, checks every test case has a prediction, and returns a report with 95% bootstrap
confidence intervals and an ``evaluator`` field naming the module that scored it.

May import: third-party libraries only (the evaluators: the training templates import them);
the evaluation step (step) also imports core.config, core.datasets and core.jobs.
"""
from core.evaluation.common import EvaluationError, bootstrap_ci, file_sha256
from core.evaluation.diagnosis import diagnosis_metrics, evaluate_diagnosis

__all__ = ["EvaluationError", "bootstrap_ci", "file_sha256", "diagnosis_metrics",
           "evaluate_diagnosis"]
