"""Math: pure functions on tensors (statistics, similarities, the closed form, losses, metrics)."""
