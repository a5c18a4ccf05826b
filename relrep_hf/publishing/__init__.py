"""relrep_hf's publishing layer (docs/architecture.md)."""
