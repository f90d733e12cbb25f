"""Tests of experiments/record/."""
