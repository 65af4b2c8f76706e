from gpuarena.cli.entry import main

main()
