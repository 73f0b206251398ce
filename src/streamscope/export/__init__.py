"""Reserved for the export layer."""
