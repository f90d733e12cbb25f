"""Tests of variants/."""
