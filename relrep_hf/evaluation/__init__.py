"""Evaluation: the zero-shot protocol (Algorithm 1) and the maps between spaces (translation,
the inverse, migration), judged, and their plots."""
