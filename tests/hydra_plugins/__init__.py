"""Tests of hydra_plugins/."""
