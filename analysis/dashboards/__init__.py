"""Dashboards outside the report: a W&B report of a sweep, built with W&B's own library
(``python -m analysis.dashboards.wandb_dashboard``)."""
