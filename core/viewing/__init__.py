"""What the pages show, as plain data: image previews with window/level and overlays
(preview), the DICOM header without patient tags (dicom_header), model views (model_views),
inference on an uploaded image (inference, through each template's load/predict), and system
stats.

May import: every core package below it and the templates' model/inference modules (never a
train.py).
"""
