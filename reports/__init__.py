"""Monthly reports: summary CSV, FinOps FOCUS export, PDF statements, sealed and versioned.

`monthly.issue_monthly` is the entry point (draft, finalize, reissue); `schedule.run_due` issues
completed months once; `adjustments` bills late data of issued months in the next report.
Everything priced comes from `analytics` (`billing` is the only adapter to it). May import core,
warehouse and analytics; never the dashboards, the actuator or the CLI.
"""
