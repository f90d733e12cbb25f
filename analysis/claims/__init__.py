"""Claims tested on a sweep's results: which claims apply to which runs (scope), the runs of each side (sides),
verdicts after Holm (evaluate), tables (render) and ``python -m analysis.claims`` (cli); the schema is
attnlab.claims."""
