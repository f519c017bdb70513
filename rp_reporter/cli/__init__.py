"""The operator CLI (cliff): ``rp-reporter``."""
