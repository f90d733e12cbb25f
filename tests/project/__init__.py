"""Whole-tree checks: imports, sizes, lint, dead code, the test layout, the package as users install it."""
