"""relrep_hf's functional layer (docs/architecture.md)."""
