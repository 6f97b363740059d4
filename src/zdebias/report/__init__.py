"""zdebias.report."""
