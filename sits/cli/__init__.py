"""The command line: the only layer that prints."""
