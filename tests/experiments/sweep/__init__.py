"""Tests of experiments/sweep/."""
