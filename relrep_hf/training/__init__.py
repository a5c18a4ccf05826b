"""Training: the anchor methods' registry, the trainers and their arguments beside them."""
