"""Shipped rule files (TOML, data only): installed as the package `advisor.rules`."""
