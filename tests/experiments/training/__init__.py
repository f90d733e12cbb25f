"""Tests of experiments/training/."""
