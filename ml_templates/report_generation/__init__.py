"""Report-generation template (2D and 3D): an image encoder (MONAI ResNet) whose feature grid a
Transformer decoder cross-attends to while writing "FINDINGS: ... IMPRESSION: ...";
dataloader_template.py, tokenizer.py, model.py, train.py, check_dataloader.py. Scored by
core.evaluation.report_generation."""
