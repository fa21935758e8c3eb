"""The audit: its tables, notes, plots and bounds, and the Audit section of the report."""
