"""What the report compares, computed before anything is drawn or written: the cells laid out in tables
(``layout``), the baseline (``baseline``), each task's metrics, tables and comparisons (``task_plan``), the
summary's ranking (``summary``), the quality-cost points (``frontier_data``) and the cells measured at long T
(``bench_cells``). Imports only the document model below it."""
