"""Benchmark data: loaders, verified downloads, candidate sets, scorers and the score cache."""
