"""Tests of experiments/tasks/."""
