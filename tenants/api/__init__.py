"""The control plane's REST API under /api/v1/."""
