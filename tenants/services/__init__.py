"""Business logic of the control plane: every multi-model workflow, transaction and task hook."""
