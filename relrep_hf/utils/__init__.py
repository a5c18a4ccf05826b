"""Foundations: defaults, input and file checks, atomic saves, Hub downloads, stored vectors."""
