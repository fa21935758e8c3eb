"""The verdict per dataset: its table, notes and plots, and the Verdict section of the report (the first screen)."""
