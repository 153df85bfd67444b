"""mqctl, the MQCloud command line (entry point: cli.main:app)."""
