"""Writers, one module per geometry kind."""
