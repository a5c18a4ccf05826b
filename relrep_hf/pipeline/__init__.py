"""The run-folder pipeline behind the CLI: embed -> fit -> onboard -> evaluate, and migration."""
