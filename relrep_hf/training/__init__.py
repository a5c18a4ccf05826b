"""Training: the head trainer and its arguments (each anchor method trains in its own folder of
`relrep_hf.anchors`)."""
