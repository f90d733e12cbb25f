"""What experiments and analysis both need and neither owns: the result.json key spelling (flatten), the
claim schema (claims) and the one bibliography (bibliography). Standard library only; it imports nothing from the
project, so both may import it."""
