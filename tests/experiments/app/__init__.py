"""Tests of experiments/app/."""
