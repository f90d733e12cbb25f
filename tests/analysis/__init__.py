"""Tests of analysis/."""
