"""Everything that reads results: data (files -> runs frame), stats, claims, report, paper, dashboards.

Layers import downwards only: command <- data <- stats <- claims <- report <- paper; nothing here imports
``experiments`` (the files it reads are the contract), only the shared, dependency-free ``common``.
"""
