from gpuarena.cli.app import main

main()
