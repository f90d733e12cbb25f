"""Tests of analysis/data/."""
