"""Console views, one module per area; ``console.urls`` wires them."""
