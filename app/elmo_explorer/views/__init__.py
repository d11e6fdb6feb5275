"""The analysis views: one package per view (model.py without Qt, view.py widgets, controller.py the
panel, export.py its exports). Import a view by its module; this package imports none of them."""
