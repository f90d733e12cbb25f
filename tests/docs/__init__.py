"""Tests of the README and docs/ as a reader meets them: links, commands and examples that run as printed."""
