"""Tests of experiments/ensemble/."""
