"""Quality studies: the method's quality against baselines, and what was tried (docs/quality.md,
docs/heads.md, docs/migration.md)."""
