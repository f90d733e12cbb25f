"""The report's document model and its renderers (``model``): sections of plain blocks rendered to Markdown and
to one self-contained HTML file. The lowest room of the report: it imports nothing of the rest."""
