"""``python -m aifabric`` runs the command line."""

from aifabric.cli import main

main()
