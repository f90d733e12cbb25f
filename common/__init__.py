"""What experiments and analysis both need and neither owns: the result.json key spelling (flatten) and the
claim schema (claims). Standard library only; it imports nothing from the project, so both may import it."""
