"""zdebias.generation."""
