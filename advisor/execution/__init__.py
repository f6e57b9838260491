"""Carrying out approved actions: backends (systemd, dry run) and the step runner."""
