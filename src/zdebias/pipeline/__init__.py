"""zdebias.pipeline."""
