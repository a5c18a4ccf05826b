"""The embedding spaces the studies read: real encoders, small LMs trained here, the
anisotropic stress; built once and cached under ``~/.cache/relrep_hf``."""
