"""relrep_hf's utils layer (docs/architecture.md)."""
