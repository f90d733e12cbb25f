"""Tests of analysis/report/."""
