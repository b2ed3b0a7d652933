"""External validation: a trained model scored on another registered dataset with the same task
and labels ("test this model on the Hospital B set"), beside its internal test results.

* compat: which model a name means, what it was trained to do, and whether a dataset is one it
  can be scored on (task, modality, anatomy, dimension, classes or label names), with errors
  that name what differs;
* run: the stage itself — the dataset read by the Data Engineer's scan and indexed unsplit (every
  case a test case) into ``<job>/external/<dataset>-<time>/``, the job's own dataloader pointed
  there, the model run over it in a child (core.viewing.index_inference), the predictions scored
  by the system's evaluator with the model's stored decision, the report written and recorded;
* views: internal and external metrics side by side, as rows, text and Markdown;
* request: "test this model on the Hospital B set" read from a chat message.

Nothing here writes into a dataset folder, and only the calling (parent) process writes the store.

May import: every core package before it (the last stage: it scores what was built).
"""
