"""Django app: tenants and everything they own; the DRF API; broker provisioning."""
