"""zdebias.evaluation."""
