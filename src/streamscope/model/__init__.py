"""Reserved for the model layer."""
