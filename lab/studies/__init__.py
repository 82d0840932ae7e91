"""Benchmarks (``bench_*``), studies (``study_*``) and the scripts behind the docs' figures.

Each module is a command (``python -m lab.studies.<name>``) that prints figures for docs/;
they may import anything in ``jobs``; nothing in ``jobs`` imports them.
"""
