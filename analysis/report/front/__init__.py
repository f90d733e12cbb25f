"""The report's front matter, its first screen: per task the cells ranked in and beyond the training range
beside their figure (``lead``, ``summary_text``), and what the statistics leave out. Imports the rooms below it
(sections, figures, plan, document); build puts it first."""
