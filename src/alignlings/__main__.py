"""`python -m alignlings ...` runs the CLI."""

from alignlings.cli.app import main

main()
