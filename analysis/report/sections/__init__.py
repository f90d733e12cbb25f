"""The report's sections after its lead: one module a section, each registered with ``SECTIONS``
(``registry``) and reading what it declares of the ``ReportContext`` (``context``). The registry imports every
module of this package, so a new section is one module here. Imports the plan, the figures and the document
model below it."""
