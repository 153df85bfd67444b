"""mqctl command groups, one module each."""
