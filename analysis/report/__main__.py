"""``python -m analysis.report``: see analysis.report.build."""

import sys

from analysis.report.build import main

sys.exit(main())
