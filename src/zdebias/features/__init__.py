"""zdebias.features."""
