"""zdebias.classify."""
