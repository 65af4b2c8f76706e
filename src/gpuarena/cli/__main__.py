"""`python -m gpuarena.cli`: the same as the `gpuarena` command."""

from gpuarena.cli.entry import main

main()
