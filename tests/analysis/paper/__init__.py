"""Tests of analysis/paper/."""
