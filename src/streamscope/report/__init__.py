"""Reserved for the report layer."""
