"""Artifacts: what is saved, loaded and pushed (anchor sets, projectors, heads, the wrapper, maps)."""
