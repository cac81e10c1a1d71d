"""``python -m ownership`` runs the command line."""

from ownership.cli import main

main()
