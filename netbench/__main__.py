"""`python -m netbench`: the same as the `netbench` console script."""

from netbench.cli.entry import main

main()
