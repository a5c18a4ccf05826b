"""Publishing: one Hub commit per artifact, model cards, portable provenance."""
