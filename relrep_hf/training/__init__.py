"""relrep_hf's training layer (docs/architecture.md)."""
