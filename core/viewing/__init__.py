"""What the pages show, as plain data: image previews (display_volume reads any image reference
into a display grid, overlays puts masks and boxes on it, slice_render draws a slice with
window/level, dataset_preview scans a dataset folder for the preview and its thumbnails), the
DICOM header without patient tags (dicom_header), model views (model_views, prediction_views),
inference on an uploaded image (model_loading rebuilds a model through its template's
load/predict, inference runs it), and system stats.

May import: every core package before it, and the templates' model/inference modules (never a
train.py).
"""
