"""Reporting: the self-contained HTML report and upstream issue bodies."""
