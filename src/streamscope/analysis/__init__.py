"""Reserved for the analysis layer."""
