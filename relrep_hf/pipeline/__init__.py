"""relrep_hf's pipeline layer (docs/architecture.md)."""
