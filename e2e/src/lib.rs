//! End-to-end scenarios for the Hollo operator live in `tests/`; they need the control plane,
//! the chart and a running operator that `e2e/run` sets up. See `e2e/README.md`.
