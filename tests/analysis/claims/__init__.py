"""Tests of analysis/claims/."""
