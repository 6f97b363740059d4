"""zdebias.stats."""
