from netbench.cli.app import main

main()
