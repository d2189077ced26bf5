"""Configs, CLI, runners, aggregation and plots: the only place that parses arguments and writes results."""
