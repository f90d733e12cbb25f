"""Statistics over seeds: intervals, Welch tests, Holm's correction and effects (inference), and the
one-sided tests and power analysis that decide a claim (claims). statsmodels for every test and correction."""
