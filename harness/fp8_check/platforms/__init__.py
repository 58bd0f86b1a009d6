"""The face of `platforms`: written by hand (issue #57)."""
