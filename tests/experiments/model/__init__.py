"""Tests of experiments/model/."""
