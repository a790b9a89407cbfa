"""OpenCL executions, one module per op family; each registers its creators on import."""
