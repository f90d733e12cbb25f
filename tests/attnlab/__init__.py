"""Tests of attnlab/."""
