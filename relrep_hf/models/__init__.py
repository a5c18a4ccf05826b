"""relrep_hf's models layer (docs/architecture.md)."""
