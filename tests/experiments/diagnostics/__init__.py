"""Tests of experiments/diagnostics/."""
