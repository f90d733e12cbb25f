"""Tests of analysis/dashboards/."""
