"""Detection template (anomaly / lesion detection as bounding boxes, 2D and 3D): MONAI
RetinaNet trained under the Transformers Trainer; scored by ``core.evaluation.detection``."""
