"""Everything that reads results: data (files -> one frame of runs), stats, claims, report, paper, dashboards and
command (what every command shares). Nothing here imports experiments or variants; only the shared ``attnlab`` core.
"""
