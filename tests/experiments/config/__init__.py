"""Tests of experiments/config/."""
