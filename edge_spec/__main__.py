"""`python -m edge_spec` runs the command line."""

from edge_spec.cli.main import main

main()
