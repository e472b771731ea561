"""`edge-spec bench` and `edge-spec calibrate`: measurements side by side, reports, near-tie checks."""
