"""Tests of experiments/bench/."""
