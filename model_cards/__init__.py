"""The model card templates (Jinja), installed as the data package ``relrep_hf.model_cards``."""
