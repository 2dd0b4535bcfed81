"""shoal's end-to-end benchmark harness (stdlib only; see bench/README.md)."""
