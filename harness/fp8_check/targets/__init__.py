"""The face of `targets`: written by hand (issue #57)."""
