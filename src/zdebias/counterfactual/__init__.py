"""zdebias.counterfactual."""
