"""MONAI segmentation template (organs, lesions; 2D and 3D; one or several image channels).

dataloader_template.py (instantiated as Datapath/dataloader.py), model.py (networks by name),
train.py (Transformers Trainer on patches, sliding-window validation and test prediction),
inference.py (sliding-window prediction mapped back to the mask's geometry), check_dataloader.py.
The system's evaluator is core.evaluation.segmentation.
"""
