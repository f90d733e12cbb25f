"""``python -m analysis.claims``: see analysis.claims.cli."""

import sys

from analysis.claims.cli import main

sys.exit(main())
